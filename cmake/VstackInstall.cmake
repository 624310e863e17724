# `cmake --install` and the Debian package (docs/library.md):
#
#   bin/vstack                                      the CLI (the library linked in statically)
#   lib/libvstack.so.MAJOR.MINOR(.PATCH), .so       the library; SONAME libvstack.so.MAJOR.MINOR
#   lib/libvstack.a                                 the same, one prelinked object
#   include/vstack/...                              the public headers (build/include/vstack)
#   lib/cmake/vstack/                               find_package(vstack 0.2): vstack::vstack
#                                                   (shared), COMPONENTS static: vstack::static
#   lib/pkgconfig/vstack.pc                         pkg-config --cflags --libs vstack
#   share/man/man1/vstack*.1                        from the CLI's own --help (help2man)
#   <nbdkit plugindir below the prefix>             nbdkit-vstack-plugin.so
#   lib/python3/dist-packages/vstack/               the Python module (tools/python)
#
# `cpack -G DEB` (in the build directory) packs all of it into vstack_VERSION_ARCH.deb.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(VSTACK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vstack)

foreach(t vstack_shared vstack_static)
  target_include_directories(${t} INTERFACE $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${t} INTERFACE cxx_std_20)
  add_dependencies(${t} vstack_headers)
endforeach()
set_target_properties(vstack_shared PROPERTIES EXPORT_NAME vstack)
set_target_properties(vstack_static PROPERTIES EXPORT_NAME static)

install(TARGETS vstack RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS vstack_shared EXPORT vstack-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS vstack_static EXPORT vstack-static-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_BINARY_DIR}/include/vstack
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT vstack-targets NAMESPACE vstack:: DESTINATION ${VSTACK_CMAKE_DIR})
install(EXPORT vstack-static-targets NAMESPACE vstack:: DESTINATION ${VSTACK_CMAKE_DIR})

# Third-party libraries: private to libvstack.so; the static library needs them at link time,
# through find_dependency (CMake) and Requires.private (pkg-config).
get_property(modules GLOBAL PROPERTY VSTACK_PKGCONFIG_MODULES)
list(REMOVE_DUPLICATES modules)
set(VSTACK_STATIC_DEPENDENCIES "")
set(VSTACK_PC_REQUIRES_PRIVATE "")
foreach(m IN LISTS modules)
  string(REPLACE "=" ";" m "${m}")
  list(GET m 0 prefix)
  list(GET m 1 module)
  string(APPEND VSTACK_STATIC_DEPENDENCIES
         "  pkg_check_modules(${prefix} REQUIRED QUIET IMPORTED_TARGET ${module})\n")
  list(APPEND VSTACK_PC_REQUIRES_PRIVATE ${module})
endforeach()
list(JOIN VSTACK_PC_REQUIRES_PRIVATE " " VSTACK_PC_REQUIRES_PRIVATE)
# Libraries found without pkg-config (librbd, librados: absolute paths) go to Libs.private.
set(VSTACK_PC_LIBS_PRIVATE "-lpthread")
foreach(d IN LISTS VSTACK_THIRD_PARTY_DEPS)
  if(IS_ABSOLUTE "${d}")
    get_filename_component(name "${d}" NAME_WE)
    string(REGEX REPLACE "^lib" "" name "${name}")
    string(APPEND VSTACK_PC_LIBS_PRIVATE " -l${name}")
  endif()
endforeach()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vstack-config.cmake.in
  ${CMAKE_BINARY_DIR}/package/vstack-config.cmake INSTALL_DESTINATION ${VSTACK_CMAKE_DIR})
# Before 1.0 a minor release may change the API: 0.2.x serves find_package(vstack 0.2) only.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/vstack-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/vstack-config.cmake
        ${CMAKE_BINARY_DIR}/package/vstack-config-version.cmake DESTINATION ${VSTACK_CMAKE_DIR})

# Relocatable: the prefix is found from the .pc file's own place (cmake --install --prefix).
file(RELATIVE_PATH VSTACK_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${PROJECT_SOURCE_DIR}/cmake/vstack.pc.in ${CMAKE_BINARY_DIR}/package/vstack.pc
               @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/vstack.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The nbdkit plugin, below the prefix where nbdkit looks on this system (Debian:
# lib/x86_64-linux-gnu/nbdkit/plugins). `./dev.sh` installs it into nbdkit's own plugindir
# (component nbdkit-plugin, tools/nbd/CMakeLists.txt).
pkg_get_variable(nbdkit_plugindir nbdkit plugindir)
string(REGEX REPLACE "^/usr/(local/)?" "" nbdkit_plugindir "${nbdkit_plugindir}")
install(TARGETS vstack_nbdkit_plugin LIBRARY DESTINATION ${nbdkit_plugindir})

# Man pages: vstack(1) and vstack-SUBCOMMAND(1), from the CLI's --help (cmake/ManPages.cmake).
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(man_dir ${CMAKE_BINARY_DIR}/man)
  add_custom_command(OUTPUT ${man_dir}/vstack.1
    COMMAND ${CMAKE_COMMAND} -DVSTACK=$<TARGET_FILE:vstack> -DHELP2MAN=${HELP2MAN}
            -DOUT=${man_dir} -P ${PROJECT_SOURCE_DIR}/cmake/ManPages.cmake
    DEPENDS vstack ${PROJECT_SOURCE_DIR}/cmake/ManPages.cmake
    COMMENT "Writing the man pages (build/man)" VERBATIM)
  add_custom_target(vstack_man ALL DEPENDS ${man_dir}/vstack.1)
  install(DIRECTORY ${man_dir}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
          FILES_MATCHING PATTERN "*.1")
else()
  message(WARNING "help2man not found: no man pages (./dev.sh installs it)")
endif()

# API reference: `cmake --build build --target vstack_docs` -> build/docs/html/index.html.
# Doxygen warnings are errors (docs/library.md, "Reference documentation").
find_package(Doxygen QUIET)
if(DOXYGEN_FOUND)
  configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${CMAKE_BINARY_DIR}/docs/Doxyfile @ONLY)
  add_custom_target(vstack_docs
    COMMAND ${DOXYGEN_EXECUTABLE} ${CMAKE_BINARY_DIR}/docs/Doxyfile
    DEPENDS vstack_headers WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/docs
    COMMENT "Doxygen: the public API reference (build/docs/html)" VERBATIM)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vstack)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "vstack maintainers <vstack@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "virtual storage stack emulator: CLI, library, headers, nbdkit plugin, Python module")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nbdkit, python3")
set(CPACK_STRIP_FILES ON)
include(CPack)
