# Writes vstack.1 and vstack-SUBCOMMAND.1 from the CLI's own help text, with help2man:
#
#   cmake -DVSTACK=<vstack binary> -DHELP2MAN=<help2man> -DOUT=<dir> -P ManPages.cmake
#
# The subcommands are the ones `vstack --help` lists, so a new subcommand gets its page without
# a change here.
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY "${OUT}")
execute_process(COMMAND "${VSTACK}" --version OUTPUT_VARIABLE version
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
string(REGEX REPLACE "^vstack " "" version "${version}")
execute_process(COMMAND "${VSTACK}" --help OUTPUT_VARIABLE help COMMAND_ERROR_IS_FATAL ANY)

# "Subcommands:" (CLI11) then one "  name   summary" line each, up to the next blank line.
string(REGEX MATCH "(SUBCOMMANDS|Subcommands):\n([^\n]+\n)+" section "${help}")
string(REGEX MATCHALL "\n  [a-z][a-z0-9-]*" names "${section}")
set(subcommands)
foreach(n IN LISTS names)
  string(STRIP "${n}" n)
  list(APPEND subcommands "${n}")
endforeach()
if(NOT subcommands)
  message(FATAL_ERROR "no subcommands found in `vstack --help`:\n${help}")
endif()

function(man page help_option name)
  execute_process(COMMAND "${HELP2MAN}" --no-info --no-discard-stderr --section=1
                          "--version-string=${version}" "--help-option=${help_option}"
                          "--name=${name}" "--output=${OUT}/${page}.1" "${VSTACK}"
                  COMMAND_ERROR_IS_FATAL ANY)
  file(READ "${OUT}/${page}.1" text)
  string(TOUPPER "${page}" title)
  string(REGEX REPLACE "\n\\.TH VSTACK " "\n.TH ${title} " text "${text}")
  file(WRITE "${OUT}/${page}.1" "${text}")
endfunction()

man(vstack --help "a virtual storage stack emulator")
foreach(sub IN LISTS subcommands)
  # The summary line of the subcommand in the top-level help.
  string(REGEX MATCH "\n  ${sub} +([^\n]*)" line "${section}")
  set(summary "${CMAKE_MATCH_1}")
  if(NOT summary)
    set(summary "vstack ${sub}")
  endif()
  man(vstack-${sub} "${sub} --help" "${summary}")
  # help2man names the program after the binary; the page is about `vstack SUB`.
  file(READ "${OUT}/vstack-${sub}.1" text)
  string(REPLACE "\nvstack \\- " "\nvstack-${sub} \\- " text "${text}")
  file(WRITE "${OUT}/vstack-${sub}.1" "${text}")
endforeach()
list(LENGTH subcommands count)
message(STATUS "man pages: vstack.1 and ${count} subcommand pages in ${OUT}")
