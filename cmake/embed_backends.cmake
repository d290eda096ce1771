# Writes every backends/*.json into one C++ include as raw string literals, so the built-in
# backends ship inside the binary and still live as readable files in the repo.
# Usage: cmake -DDIR=<backends dir> -DOUT=<file.inc> -P embed_backends.cmake
file(GLOB files "${DIR}/*.json")
list(SORT files)
set(content "// Generated from backends/*.json by cmake/embed_backends.cmake. Do not edit.\n")
foreach(f IN LISTS files)
  get_filename_component(stem "${f}" NAME_WE)
  file(READ "${f}" text)
  string(APPEND content "{\"${stem}\", R\"qforge_json(${text})qforge_json\"},\n")
endforeach()
# Rewrite only on change so the one file including it is not rebuilt for nothing.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
