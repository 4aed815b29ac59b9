# check_loaded.cmake - a short dpmbench run that must (1) warn, before its
# first table and in report.md and results.json, that the figures are
# unreliable when the load average is over half the CPUs (forced here with
# --assume-loaded), (2) run its rounds round-major: every backend's round 1
# before any backend's round 2, in an order rotated by the round, and (3)
# leave no gnuplot .log file in the results directory or its working
# directory.
#   cmake -DDPMBENCH=<dpmbench> -DOUT=<results root> -P check_loaded.cmake
cmake_minimum_required(VERSION 3.19)
if(NOT DPMBENCH OR NOT OUT)
  message(FATAL_ERROR "pass -DDPMBENCH=<dpmbench> -DOUT=<dir>")
endif()
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}/cwd")
execute_process(COMMAND "${DPMBENCH}" --smoke --assume-loaded --rounds 2
                        --workloads bulk,prodcons --backends dpmalloc,dpm-preload,glibc
                        --out "${OUT}"
                WORKING_DIRECTORY "${OUT}/cwd"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "dpmbench failed (${rc}):\n${out}\n${err}")
endif()

# (1) the warning, first thing before the tables, in report.md and the JSON
string(FIND "${out}" "WARNING: load average" warn_at)
string(FIND "${out}" "\n== bulk" table_at)
if(warn_at LESS 0 OR table_at LESS 0 OR warn_at GREATER table_at)
  message(FATAL_ERROR "no load warning before the first table:\n${out}")
endif()
string(FIND "${out}" "these figures are unreliable" at)
if(at LESS 0)
  message(FATAL_ERROR "the warning does not say the figures are unreliable:\n${out}")
endif()
set(results "${OUT}/latest-smoke")
file(READ "${results}/report.md" md)
string(FIND "${md}" "> **WARNING**: load average" at)
if(at LESS 0)
  message(FATAL_ERROR "report.md has no load warning")
endif()
file(READ "${results}/results.json" json)
string(JSON loaded GET "${json}" load_warning)
if(NOT loaded)
  message(FATAL_ERROR "results.json: load_warning is ${loaded}")
endif()

# (2) round-major: the "round r/2 done" lines (stderr is not a tty here)
string(REGEX MATCHALL "dpmbench: bulk +[a-z-]+ +round [12]/2" lines "${err}")
set(order "")
foreach(l IN LISTS lines)
  string(REGEX REPLACE "dpmbench: bulk +([a-z-]+) +round ([12])/2" "\\2:\\1" l "${l}")
  list(APPEND order "${l}")
endforeach()
set(want "1:dpmalloc;1:dpm-preload;1:glibc;2:dpm-preload;2:glibc;2:dpmalloc")
if(NOT order STREQUAL want)
  message(FATAL_ERROR "bulk's rounds ran in the order '${order}', expected '${want}'")
endif()

# (3) no stray gnuplot logs
file(GLOB logs "${results}/*.log" "${OUT}/cwd/*.log")
if(logs)
  message(FATAL_ERROR "stray log files: ${logs}")
endif()
message(STATUS "load warning, round-major order and no stray logs: ok")
