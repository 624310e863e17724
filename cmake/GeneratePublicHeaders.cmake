# Writes the installed form of the public headers (cmake/VstackComponent.cmake):
#
#   cmake -DMAP=<public-headers.txt> -DROOT=<source dir> -DOUT=<build/include> -P this
#
# MAP has one "source=installed" pair a line, e.g. "lib/errors.h=vstack/errors.h". Each public
# header is copied with its #include "source" lines rewritten to #include <installed>; nothing
# else changes, so line numbers match the source. An include of a header that is not public is
# an error: the installed API would not compile.
cmake_minimum_required(VERSION 3.25)
file(STRINGS "${MAP}" pairs)
foreach(p IN LISTS pairs)
  string(REPLACE "=" ";" p "${p}")
  list(GET p 0 source)
  list(GET p 1 installed)
  set("installed_of_${source}" "${installed}")
  list(APPEND sources "${source}")
endforeach()

set(errors "")
foreach(source IN LISTS sources)
  file(READ "${ROOT}/${source}" text)
  string(REGEX MATCHALL "#include \"[^\"]*\"" includes "${text}")
  foreach(inc IN LISTS includes)
    string(REGEX REPLACE "#include \"([^\"]*)\"" "\\1" header "${inc}")
    if(DEFINED "installed_of_${header}")
      string(REPLACE "${inc}" "#include <${installed_of_${header}}>" text "${text}")
    else()
      string(APPEND errors "${source}: includes \"${header}\", which is not a public header "
             "(add it to a vstack_public_headers() list, or do not include it here)\n")
    endif()
  endforeach()
  set(target "${OUT}/${installed_of_${source}}")
  set(old "")
  if(EXISTS "${target}")
    file(READ "${target}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${target}" "${text}")
  else()
    file(TOUCH_NOCREATE "${target}")
  endif()
endforeach()
if(errors)
  message(FATAL_ERROR "Public headers:\n${errors}")
endif()
