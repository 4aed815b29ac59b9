# Run by `cmake --install` (install(CODE) in CMakeLists.txt): writes
# dpmalloc.pc for the prefix of this install, which --prefix may have
# changed since configure time, and installs it (DESTDIR applies).
# In: DPM_PC_IN, DPM_PC_OUT, DPM_PC_LIBDIR, DPM_PC_INCLUDEDIR, DPM_PC_VERSION.
set(DPM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(d LIBDIR INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${DPM_PC_${d}}")
    set(DPM_PC_${d} "\${prefix}/${DPM_PC_${d}}")
  endif()
endforeach()
configure_file("${DPM_PC_IN}" "${DPM_PC_OUT}" @ONLY)
string(REPLACE "\${prefix}" "${CMAKE_INSTALL_PREFIX}" dest "${DPM_PC_LIBDIR}")
file(INSTALL "${DPM_PC_OUT}" DESTINATION "${dest}/pkgconfig")
