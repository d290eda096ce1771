# The instrumented build (issue #22): QFORGE_SANITIZE compiles and links every target with
# AddressSanitizer and UndefinedBehaviorSanitizer; QFORGE_FUZZ adds libFuzzer's coverage
# instrumentation (-fsanitize=fuzzer-no-link) so the same build tree serves the test suite under the
# sanitizers and the fuzz targets (fuzz/). Clang only (libFuzzer is Clang's). scripts/sanitize.sh
# configures it in build-sanitize/. Libtorch, protobuf and the other Debian libraries are not
# instrumented: ASan still sees their heap (malloc is intercepted), UBSan only qforge's code.
option(QFORGE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer (Clang)" OFF)
option(QFORGE_FUZZ "Build the libFuzzer fuzz targets (needs QFORGE_SANITIZE)" OFF)

if(QFORGE_FUZZ AND NOT QFORGE_SANITIZE)
  message(FATAL_ERROR "QFORGE_FUZZ needs QFORGE_SANITIZE=ON (the fuzz targets are ASan+UBSan builds)")
endif()

if(QFORGE_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "QFORGE_SANITIZE needs Clang (configure with -DCMAKE_CXX_COMPILER=clang++)")
  endif()
  # An UBSan report aborts (as ASan's do), so a test or a fuzz run fails on it instead of logging on.
  # -O1 and line tables: ASan's recommended speed, stack traces with file:line.
  set(QFORGE_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                            -fno-omit-frame-pointer)
  add_compile_options(${QFORGE_SANITIZE_FLAGS} -O1 -gline-tables-only)
  add_link_options(${QFORGE_SANITIZE_FLAGS})
  if(QFORGE_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
  # UBSan's vptr check references the typeinfo of every polymorphic class it checks, and libtorch
  # does not export c10::DynamicType's (IValue's type tags, used by the checkpoint's pickles): the
  # link fails. Only that file goes without the vptr check.
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/algos/qat_checkpoint.cpp PROPERTIES
                              COMPILE_OPTIONS -fno-sanitize=vptr)
endif()
