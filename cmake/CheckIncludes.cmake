# The include-boundary check, run by the build (cmake/VstackComponent.cmake):
#
#   cmake -DDATA=<components.cmake> -DROOT=<source dir> -DSTAMP=<file> -P CheckIncludes.cmake
#
# Every #include "x/y.h" in a component's files must name a header of
#   - the component itself, of lib/ (vstack_core, which every component may use), or of a
#     component it declares in DEPS or PRIVATE_DEPS, or one of theirs through DEPS;
# and must keep the architecture (docs/design.md, "Components"):
#   - lib/ includes nothing above it;
#   - formats/ and blockdev/ do not include each other;
#   - nothing in the library includes tools/ or tests/.
# Fails with one line per offending include, saying what to change.
cmake_minimum_required(VERSION 3.25)
include(${DATA})

# The rule an include from `from_dir` of `to_dir` breaks, or "".
function(architecture_rule from_dir to_dir out)
  set(rule "")
  if(to_dir MATCHES "^(tools|tests)(/|$)")
    set(rule "nothing in the library includes tools/ or tests/")
  elseif(from_dir MATCHES "^lib(/|$)" AND NOT to_dir MATCHES "^lib(/|$)")
    set(rule "lib/ includes nothing above it")
  elseif(from_dir MATCHES "^formats(/|$)" AND to_dir MATCHES "^blockdev(/|$)")
    set(rule "formats/ and blockdev/ do not include each other")
  elseif(from_dir MATCHES "^blockdev(/|$)" AND to_dir MATCHES "^formats(/|$)")
    set(rule "formats/ and blockdev/ do not include each other")
  endif()
  set(${out} "${rule}" PARENT_SCOPE)
endfunction()

# The component owning `dir` (the longest component folder that contains it), or "".
function(owner_of dir out)
  set(best "")
  set(best_length -1)
  foreach(c IN LISTS COMPONENTS)
    set(cdir "${${c}_DIR}")
    string(LENGTH "${cdir}" length)
    if((dir STREQUAL cdir OR dir MATCHES "^${cdir}/") AND length GREATER best_length)
      set(best ${c})
      set(best_length ${length})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# What a component may include: itself, vstack_core, its declarations, and their DEPS.
function(allowed_of component out)
  set(allowed ${component} vstack_core ${${component}_DEPS})
  set(queue ${${component}_DEPS})
  while(queue)
    list(POP_FRONT queue d)
    foreach(dd IN LISTS ${d}_DEPS)
      if(NOT dd IN_LIST allowed)
        list(APPEND allowed ${dd})
        list(APPEND queue ${dd})
      endif()
    endforeach()
  endwhile()
  set(${out} ${allowed} PARENT_SCOPE)
endfunction()

set(errors "")
foreach(c IN LISTS COMPONENTS)
  set(cdir "${${c}_DIR}")
  # A declared dependency must itself respect the architecture.
  foreach(d IN LISTS ${c}_DEPS)
    architecture_rule("${cdir}" "${${d}_DIR}" rule)
    if(rule)
      string(APPEND errors "${cdir}/CMakeLists.txt: ${c} declares ${d} (${${d}_DIR}/), "
             "but ${rule}\n")
    endif()
  endforeach()
  allowed_of(${c} allowed)
  foreach(file IN LISTS ${c}_FILES)
    file(RELATIVE_PATH rel_file "${ROOT}" "${file}")
    cmake_path(GET rel_file PARENT_PATH from_dir)
    file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" header "${line}")
      if(NOT header MATCHES "/")
        continue()  # a header next to the file
      endif()
      cmake_path(GET header PARENT_PATH to_dir)
      architecture_rule("${from_dir}" "${to_dir}" rule)
      if(rule)
        string(APPEND errors "${rel_file}: #include \"${header}\": ${rule}\n")
        continue()
      endif()
      owner_of("${to_dir}" owner)
      if(NOT owner)
        string(APPEND errors "${rel_file}: #include \"${header}\": ${to_dir}/ belongs to no "
               "library component (library code may include only components)\n")
      elseif(NOT owner IN_LIST allowed)
        string(APPEND errors "${rel_file}: #include \"${header}\": ${c} does not declare "
               "${owner}; add `DEPS ${owner}` (or `PRIVATE_DEPS ${owner}` if no header of ${c} "
               "needs it) to vstack_component(NAME ${c} ...) in ${cdir}/CMakeLists.txt\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(errors)
  message(FATAL_ERROR "Include boundaries (docs/design.md, \"Components\"):\n${errors}")
endif()
file(TOUCH "${STAMP}")
