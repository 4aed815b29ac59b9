# Run by `cmake --install` (install(CODE) in CMakeLists.txt): writes one
# .pc file (dpmalloc.pc, dpmalloc-dpdk.pc) for this install and installs
# it (DESTDIR applies).
# In: DPM_PC_IN, DPM_PC_OUT, DPM_PC_LIBDIR, DPM_PC_INCLUDEDIR, DPM_PC_VERSION.
#
# prefix is relative to the file's own directory (${pcfiledir}/../..) when
# the libdir is below the prefix, as it is by default: the tree is then
# usable wherever it lies, a DESTDIR stage included, with PKG_CONFIG_PATH
# alone. PKG_CONFIG_SYSROOT_DIR, the other way to use a stage, is applied
# by pkg-config to every package of the call, so it also prefixes
# libdpdk's /usr/include and breaks dpmalloc-dpdk (Requires: libdpdk).
# An absolute libdir gets an absolute prefix.
# pkg-config splits its output at spaces unless the .pc file escapes them
# ("\ "): then it prints "-I/opt/my\ dpm/include", which meson, CMake's
# FindPkgConfig and a shell's eval take as one word (a plain $(...) does
# not); pkgconf escapes the spaces of ${pcfiledir} itself.
set(dest_libdir "${DPM_PC_LIBDIR}")
if(IS_ABSOLUTE "${DPM_PC_LIBDIR}")
  string(REPLACE " " "\\ " DPM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  # one ".." for pkgconfig/, one per component of the libdir
  set(DPM_PC_PREFIX "\${pcfiledir}/..")
  string(REPLACE "/" ";" parts "${DPM_PC_LIBDIR}")
  foreach(part ${parts})
    if(NOT part STREQUAL "" AND NOT part STREQUAL ".")
      string(APPEND DPM_PC_PREFIX "/..")
    endif()
  endforeach()
endif()
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
