# Run by `cmake --install` (install(CODE) in CMakeLists.txt): writes
# dpmalloc.pc for the prefix of this install, which --prefix may have
# changed since configure time, and installs it (DESTDIR applies).
# In: DPM_PC_IN, DPM_PC_OUT, DPM_PC_LIBDIR, DPM_PC_INCLUDEDIR, DPM_PC_VERSION.
# pkg-config splits its output at spaces unless the .pc file escapes them
# ("\ "): then it prints "-I/opt/my\ dpm/include", which meson, CMake's
# FindPkgConfig and a shell's eval take as one word (a plain $(...) does not).
set(dest_libdir "${DPM_PC_LIBDIR}")
string(REPLACE " " "\\ " DPM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(d LIBDIR INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${DPM_PC_${d}}")
    set(DPM_PC_${d} "\${prefix}/${DPM_PC_${d}}")
  endif()
  string(REPLACE " " "\\ " DPM_PC_${d} "${DPM_PC_${d}}")
endforeach()
configure_file("${DPM_PC_IN}" "${DPM_PC_OUT}" @ONLY)
if(NOT IS_ABSOLUTE "${dest_libdir}")
  set(dest_libdir "${CMAKE_INSTALL_PREFIX}/${dest_libdir}")
endif()
file(INSTALL "${DPM_PC_OUT}" DESTINATION "${dest_libdir}/pkgconfig")
