# Entry points for people and CI. The real build is CMake + Ninja.
#   make         release build in build/ (build/libdpmalloc.so)
#   make test    configure, build and run every test (CTest)
#   make bench   quick benchmark against every allocator found
#   make install header, libraries, dpmalloc.pc, CMake package, docs,
#                bin/dpmalloc-stat
#                into PREFIX (/usr/local), under DESTDIR if given
BUILD ?= build
CMAKE ?= cmake
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all release test test-thread bench bench-full bench-deps asan tsan fuzz install clean

all: release

release:
	$(CMAKE) -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(BUILD) -j

# after ctest, one line per skipped test with the reason it printed
# (tools/ctest_skipped.sh reads ctest's JUnit file); ctest's status is kept
test: release
	cd $(BUILD) && { ctest --output-on-failure -j2 --timeout 600 --output-junit ctest-junit.xml; \
	  rc=$$?; "$(CURDIR)/tools/ctest_skipped.sh" ctest-junit.xml; exit $$rc; }

# the whole suite once more with every thread on its own cache (the
# fallback where CPU caches cannot run: docs/design.md)
test-thread:
	$(CMAKE) -S . -B build-thread $(GEN) -DCMAKE_BUILD_TYPE=Release -DDPM_THREAD_CACHES_ONLY=ON -DDPM_BUILD_BENCH=OFF
	$(CMAKE) --build build-thread -j
	cd build-thread && { ctest --output-on-failure -j2 --timeout 600 --output-junit ctest-junit.xml; \
	  rc=$$?; "$(CURDIR)/tools/ctest_skipped.sh" ctest-junit.xml; exit $$rc; }

# only the libraries are built; the prefix is given at install time, so an
# earlier configure of $(BUILD) with another prefix does not matter
PREFIX ?= /usr/local
install:
	$(CMAKE) -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(BUILD) -j --target dpmalloc dpmalloc_static dpmalloc_plain dpmalloc-stat
	DESTDIR="$(DESTDIR)" $(CMAKE) --install $(BUILD) --prefix "$(PREFIX)"

asan:
	$(CMAKE) -S . -B build-asan $(GEN) -DCMAKE_BUILD_TYPE=Release -DDPM_SANITIZE=address,undefined -DDPM_DEBUG_CHECKS=ON
	$(CMAKE) --build build-asan -j
	cd build-asan && ctest --output-on-failure -j2 --timeout 900 -L sanitize

tsan:
	$(CMAKE) -S . -B build-tsan $(GEN) -DCMAKE_BUILD_TYPE=Release -DDPM_SANITIZE=thread
	$(CMAKE) --build build-tsan -j
	# TSan's deadlock detector tracks at most 64 held locks; fork's prepare
	# handler holds every arena and bin lock at once, by design.
	cd build-tsan && TSAN_OPTIONS="detect_deadlocks=0 $(TSAN_OPTIONS)" ctest --output-on-failure -j2 --timeout 900 -L sanitize

# Long fuzzer run (tests/fuzz): a fresh seed unless FUZZ_SEED is given;
# FUZZ_ARGS adds options, e.g. FUZZ_ARGS="--threads 8 --avoid sized-slack".
# DPMALLOC_CONF from the environment applies.
FUZZ_SECONDS ?= 300
FUZZ_SEED ?=
fuzz: release
	$(BUILD)/tests/test_fuzz --seconds $(FUZZ_SECONDS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED)) $(FUZZ_ARGS)

# --- benchmark targets (owned by bench/) ---
#   make bench        quick run, a few minutes (bench/results/latest-quick)
#   make bench-full   the whole matrix (bench/results/latest-full)
#   make bench-docs   full run, written to docs/benchmarks.md + docs/benchmarks/
#   make bench-deps   only the peer check/install below
#   make bench-real   gcc and git gc under each allocator: wall time, peak RSS
#                     (REAL_ARGS="--stats gcc", RUNS=3, REPO=<git dir>, SQLITE_C=<file>)
#   BENCH_ARGS="--workloads frag,tunnels --backends dpmalloc,jemalloc" narrows a run
# bench, bench-full and bench-docs first run tools/bench_deps.sh: as root on
# Debian it apt-gets the missing peers (jemalloc, mimalloc, tcmalloc, DPDK,
# pkg-config, gnuplot), otherwise it names each missing package; the cmake
# run after it then finds libdpdk and compiles the rte_malloc column in.
.PHONY: bench-build bench-smoke bench-docs bench-real
# only what the benchmark needs (dpmbench, libdpmalloc.so), not the tests
bench-build:
	$(CMAKE) -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(BUILD) -j --target dpmbench

define bench_run
	@tools/bench_deps.sh
	$(CMAKE) -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(BUILD) -j --target dpmbench
	$(BUILD)/bench/dpmbench $(1) $(BENCH_ARGS)
endef

bench:
	$(call bench_run,--quick)

bench-full:
	$(call bench_run,--full)

bench-smoke: bench-build
	$(BUILD)/bench/dpmbench --smoke $(BENCH_ARGS)

# the seed tables have a page of their own (docs/benchmarks-seed.md, from a
# quick run): in full mode rte_malloc's 16-thread table alone runs for
# most of an hour
DOCS_WORKLOADS := frag,bulk,nobulk,realloc,threads,tunnels,counters,larson,prodcons,cache-scratch,cache-thrash,churn,contention,memory
bench-docs:
	$(call bench_run,--full --workloads $(DOCS_WORKLOADS) --docs docs/benchmarks.md)

bench-real:
	$(CMAKE) -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(BUILD) -j --target dpmalloc
	DPM_LIB=$(abspath $(BUILD))/libdpmalloc.so bench/real_programs.sh $(REAL_ARGS)

bench-deps:
	@tools/bench_deps.sh

clean:
	rm -rf $(BUILD) build-asan build-tsan
