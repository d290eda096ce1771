# The man pages and the bash completion script, made by the built qforge from its own
# command-line definitions after each build of the binary (`qforge help --man-dir`,
# `qforge completion bash`; see cmake/generate_docs.cmake), so they cannot drift from the flags:
#   build/man/qforge.1, build/man/qforge-COMMAND.1    -> MANDIR/man1
#   build/completion/qforge                          -> DATADIR/bash-completion/completions
# Both install with the command (component runtime). The tests are tests/cli/man_page_test.cpp
# and tests/cli/completion_test.cpp.
include(GNUInstallDirs)

set(QFORGE_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(QFORGE_COMPLETION_FILE ${CMAKE_BINARY_DIR}/completion/qforge)
add_custom_command(
  OUTPUT ${QFORGE_MAN_DIR}/qforge.1 ${QFORGE_COMPLETION_FILE}
  COMMAND ${CMAKE_COMMAND} -DQFORGE=$<TARGET_FILE:qforge> -DMAN_DIR=${QFORGE_MAN_DIR}
          -DCOMPLETION_FILE=${QFORGE_COMPLETION_FILE}
          -P ${CMAKE_SOURCE_DIR}/cmake/generate_docs.cmake
  DEPENDS qforge ${CMAKE_SOURCE_DIR}/cmake/generate_docs.cmake
  COMMENT "Generating qforge's man pages and bash completion"
  VERBATIM)
add_custom_target(qforge_docs ALL DEPENDS ${QFORGE_MAN_DIR}/qforge.1 ${QFORGE_COMPLETION_FILE})

# A directory, not a list of pages: the commands are known to the binary, not to CMake.
install(DIRECTORY ${QFORGE_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime
        FILES_MATCHING PATTERN "*.1")
install(FILES ${QFORGE_COMPLETION_FILE}
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT runtime)
