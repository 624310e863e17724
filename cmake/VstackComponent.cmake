# Components are the static libraries that make up vstack (the contract in lib/, each backend,
# layer and format). Layers and backends register themselves by name from static initialisers,
# so every component is linked whole-archive through the single target `vstack::all`; link that
# and nothing else from executables and tests.
#
#   vstack_component(NAME vstack_zstd SOURCES zstd_device.cc PRIVATE_DEPS PkgConfig::LIBZSTD)
#
# Components do not list each other as dependencies: every one of them reaches the final link
# through vstack::all, and CMake refuses to link one library both whole-archive and normally.

define_property(GLOBAL PROPERTY VSTACK_COMPONENTS
  BRIEF_DOCS "vstack component libraries" FULL_DOCS "Every library made by vstack_component().")

function(vstack_component)
  cmake_parse_arguments(C "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${C_NAME} STATIC ${C_SOURCES})
  target_link_libraries(${C_NAME} PUBLIC ${C_DEPS} PRIVATE ${C_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY VSTACK_COMPONENTS ${C_NAME})
endfunction()

function(vstack_finish_components)
  get_property(components GLOBAL PROPERTY VSTACK_COMPONENTS)
  add_library(vstack_all INTERFACE)
  foreach(c IN LISTS components)
    target_link_libraries(vstack_all INTERFACE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${c}>")
  endforeach()
  add_library(vstack::all ALIAS vstack_all)
endfunction()
