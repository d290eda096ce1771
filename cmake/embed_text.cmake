# Writes one text file into a C++ include as a raw string literal, so a script qforge runs (the
# ONNX Runtime runner, tools/ort/run_model.js) ships inside the binary and still lives as a
# readable file in the repo.
# Usage: cmake -DIN=<file> -DOUT=<file.inc> -P embed_text.cmake
file(READ "${IN}" text)
string(FIND "${text}" ")qforge_text\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )qforge_text\"")
endif()
get_filename_component(name "${IN}" NAME)
set(content "// Generated from ${name} by cmake/embed_text.cmake. Do not edit.\nR\"qforge_text(${text})qforge_text\"\n")
# Rewrite only on change so the one file including it is not rebuilt for nothing.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
