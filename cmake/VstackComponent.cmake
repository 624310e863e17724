# Components are the parts of the vstack library: the contract in lib/, each backend, layer and
# format, the workload engine. Each is an object library in its own folder that states what it
# uses:
#
#   vstack_component(NAME vstack_zstd SOURCES zstd_device.cc
#                    DEPS vstack_metastore PRIVATE_DEPS PkgConfig::LIBZSTD)
#
#   DEPS          other components whose headers this one includes (vstack_core, lib/, is
#                 implied), and third-party targets its own headers need
#   PRIVATE_DEPS  third-party targets only its .cc files need (they stay inside the library)
#
# vstack_finish_components() then builds every component's objects, compiled once, into
#   vstack_shared   libvstack.so.MAJOR.MINOR (hidden visibility; the public headers export)
#   vstack_static   libvstack.a, holding ONE relocatable object (ld -r of all components): any
#                   symbol a program uses pulls in the whole library, so the built-in layers'
#                   static registrations always run, with no --whole-archive from the user
# and checks, as part of the build, that no file includes across a boundary it should not
# (cmake/CheckIncludes.cmake; docs/design.md, "Components"). Executables and tests in the tree
# link `vstack::all` (= vstack_static) and never a component directly: its objects are already
# in the library.

define_property(GLOBAL PROPERTY VSTACK_COMPONENTS
  BRIEF_DOCS "vstack component libraries" FULL_DOCS "Every library made by vstack_component().")

function(vstack_component)
  cmake_parse_arguments(C "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${C_NAME} OBJECT ${C_SOURCES})
  set_target_properties(${C_NAME} PROPERTIES CXX_VISIBILITY_PRESET hidden
                        C_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  file(RELATIVE_PATH dir ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  # vstack_* names are components: recorded for the include check (their objects all end up
  # in one library). Anything else is linked; an imported target made in this folder
  # (pkg_check_modules) becomes global, so that the libraries made at the top can link it too.
  set(components)
  foreach(kind DEPS PRIVATE_DEPS)
    set(scope PUBLIC)
    if(kind STREQUAL PRIVATE_DEPS)
      set(scope PRIVATE)
    endif()
    foreach(d IN LISTS C_${kind})
      if(d MATCHES "^vstack_")
        list(APPEND components ${d})
        continue()
      endif()
      target_link_libraries(${C_NAME} ${scope} ${d})
      set_property(GLOBAL APPEND PROPERTY VSTACK_THIRD_PARTY ${d})
      if(d MATCHES "^PkgConfig::(.+)$")  # for the package's find_dependency and vstack.pc
        set_property(GLOBAL APPEND PROPERTY VSTACK_PKGCONFIG_MODULES
                     "${CMAKE_MATCH_1}=${${CMAKE_MATCH_1}_MODULE_NAME}")
      endif()
      if(TARGET ${d})
        get_target_property(imported ${d} IMPORTED)
        get_target_property(global ${d} IMPORTED_GLOBAL)
        get_target_property(where ${d} SOURCE_DIR)
        if(imported AND NOT global AND where STREQUAL CMAKE_CURRENT_SOURCE_DIR)
          set_target_properties(${d} PROPERTIES IMPORTED_GLOBAL TRUE)
        endif()
      endif()
    endforeach()
  endforeach()
  set_target_properties(${C_NAME} PROPERTIES VSTACK_DIR "${dir}" VSTACK_DEPS "${components}")
  set_property(GLOBAL APPEND PROPERTY VSTACK_COMPONENTS ${C_NAME})
endfunction()

# The files of a component: its sources and every header in their folders.
function(_vstack_component_files component out)
  get_target_property(sources ${component} SOURCES)
  get_target_property(source_dir ${component} SOURCE_DIR)
  set(files)
  set(dirs)
  foreach(s IN LISTS sources)
    cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${source_dir} NORMALIZE OUTPUT_VARIABLE s)
    list(APPEND files ${s})
    cmake_path(GET s PARENT_PATH d)
    list(APPEND dirs ${d})
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  foreach(d IN LISTS dirs)
    file(GLOB headers CONFIGURE_DEPENDS ${d}/*.h)
    list(APPEND files ${headers})
  endforeach()
  set(${out} ${files} PARENT_SCOPE)
endfunction()

function(vstack_finish_components)
  get_property(components GLOBAL PROPERTY VSTACK_COMPONENTS)

  set(check_data "set(COMPONENTS ${components})\n")
  foreach(c IN LISTS components)
    get_target_property(dir ${c} VSTACK_DIR)
    get_target_property(declared ${c} VSTACK_DEPS)
    _vstack_component_files(${c} files)
    string(APPEND check_data "set(${c}_DIR \"${dir}\")\nset(${c}_DEPS \"${declared}\")\n"
           "set(${c}_FILES \"${files}\")\n")
    list(APPEND all_files ${files})
  endforeach()
  get_property(third_party GLOBAL PROPERTY VSTACK_THIRD_PARTY)
  list(REMOVE_DUPLICATES third_party)

  # The include-boundary check (docs/design.md, "Components").
  set(data_file ${CMAKE_BINARY_DIR}/include-check/components.cmake)
  file(WRITE ${data_file} "${check_data}")
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/include-check/ok.stamp
    COMMAND ${CMAKE_COMMAND} -DDATA=${data_file} -DROOT=${PROJECT_SOURCE_DIR}
            -DSTAMP=${CMAKE_BINARY_DIR}/include-check/ok.stamp
            -P ${PROJECT_SOURCE_DIR}/cmake/CheckIncludes.cmake
    DEPENDS ${all_files} ${data_file} ${PROJECT_SOURCE_DIR}/cmake/CheckIncludes.cmake
    COMMENT "Checking include boundaries between components" VERBATIM)
  add_custom_target(vstack_include_check ALL
    DEPENDS ${CMAKE_BINARY_DIR}/include-check/ok.stamp)

  set(objects)
  foreach(c IN LISTS components)
    list(APPEND objects "$<TARGET_OBJECTS:${c}>")
  endforeach()

  # libvstack.so
  add_library(vstack_shared SHARED)
  target_link_libraries(vstack_shared PRIVATE ${components})
  set_target_properties(vstack_shared PROPERTIES OUTPUT_NAME vstack
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
    LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libvstack.map)
  target_link_options(vstack_shared PRIVATE
    -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/libvstack.map)
  if(VSTACK_SANITIZE OR VSTACK_TSAN)  # a test build: everything in it links the static library
    set_target_properties(vstack_shared PROPERTIES EXCLUDE_FROM_ALL ON)
  else()
    target_link_options(vstack_shared PRIVATE -Wl,--no-undefined)
  endif()
  add_dependencies(vstack_shared vstack_include_check)

  # libvstack.a: one relocatable object made of every component's objects.
  set(prelinked ${CMAKE_BINARY_DIR}/lib/vstack_prelinked.o)
  add_custom_command(OUTPUT ${prelinked}
    COMMAND ${CMAKE_LINKER} -r -o ${prelinked} ${objects}
    DEPENDS ${objects} ${components}
    COMMENT "Prelinking libvstack.a into one object" COMMAND_EXPAND_LISTS VERBATIM)
  add_library(vstack_static STATIC ${prelinked})
  set_source_files_properties(${prelinked} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set_target_properties(vstack_static PROPERTIES OUTPUT_NAME vstack LINKER_LANGUAGE CXX
    ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
  target_link_libraries(vstack_static PRIVATE ${third_party})
  add_dependencies(vstack_static vstack_include_check)
  add_library(vstack::all ALIAS vstack_static)
  set(VSTACK_THIRD_PARTY_DEPS ${third_party} PARENT_SCOPE)
endfunction()

# The public API: headers installed under include/vstack/ (docs/library.md). In the tree they
# stay where they are and include each other by their source paths ("lib/errors.h"); the build
# writes the installed copies into build/include/vstack/, with exactly those include lines
# rewritten (<vstack/errors.h>), and fails if a public header includes an internal one.
#
#   vstack_public_headers(DESTINATION workload HEADERS runner.h matrix.h)
#                                   -> include/vstack/workload/runner.h ...
define_property(GLOBAL PROPERTY VSTACK_PUBLIC_HEADERS
  BRIEF_DOCS "vstack public headers" FULL_DOCS "source path=installed path, for each one.")

function(vstack_public_headers)
  cmake_parse_arguments(P "" "DESTINATION" "HEADERS" ${ARGN})
  foreach(h IN LISTS P_HEADERS)
    file(RELATIVE_PATH source ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${h})
    if(P_DESTINATION)
      set(installed vstack/${P_DESTINATION}/${h})
    else()
      set(installed vstack/${h})
    endif()
    set_property(GLOBAL APPEND PROPERTY VSTACK_PUBLIC_HEADERS "${source}=${installed}")
  endforeach()
endfunction()

# Defines the target vstack_headers (build/include/vstack/...), part of `all`.
function(vstack_finish_public_headers)
  get_property(pairs GLOBAL PROPERTY VSTACK_PUBLIC_HEADERS)
  set(sources)
  set(outputs)
  foreach(p IN LISTS pairs)
    string(REPLACE "=" ";" p "${p}")
    list(GET p 0 source)
    list(GET p 1 installed)
    list(APPEND sources ${PROJECT_SOURCE_DIR}/${source})
    list(APPEND outputs ${CMAKE_BINARY_DIR}/include/${installed})
  endforeach()
  set(map ${CMAKE_BINARY_DIR}/include/public-headers.txt)
  string(REPLACE ";" "\n" map_text "${pairs}")
  file(CONFIGURE OUTPUT ${map} CONTENT "${map_text}\n")
  add_custom_command(OUTPUT ${outputs}
    COMMAND ${CMAKE_COMMAND} -DMAP=${map} -DROOT=${PROJECT_SOURCE_DIR}
            -DOUT=${CMAKE_BINARY_DIR}/include
            -P ${PROJECT_SOURCE_DIR}/cmake/GeneratePublicHeaders.cmake
    DEPENDS ${sources} ${map} ${PROJECT_SOURCE_DIR}/cmake/GeneratePublicHeaders.cmake
    COMMENT "Writing the public headers (build/include/vstack)" VERBATIM)
  add_custom_target(vstack_headers ALL DEPENDS ${outputs})
  set(VSTACK_PUBLIC_HEADER_FILES ${outputs} PARENT_SCOPE)
endfunction()
