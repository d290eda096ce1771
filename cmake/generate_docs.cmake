# Script mode (cmake -P), run by cmake/docs.cmake after qforge is built:
#   -DQFORGE=path/to/qforge -DMAN_DIR=dir -DCOMPLETION_FILE=file
# Writes every man page into MAN_DIR (emptied first, so a removed command leaves no page behind)
# and the bash completion script into COMPLETION_FILE.
foreach(var QFORGE MAN_DIR COMPLETION_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "generate_docs.cmake needs -D${var}=...")
  endif()
endforeach()

file(REMOVE_RECURSE ${MAN_DIR})
execute_process(COMMAND ${QFORGE} help --man-dir ${MAN_DIR} RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "qforge help --man-dir ${MAN_DIR} failed (${result})")
endif()

get_filename_component(completion_dir ${COMPLETION_FILE} DIRECTORY)
file(MAKE_DIRECTORY ${completion_dir})
execute_process(COMMAND ${QFORGE} completion bash OUTPUT_FILE ${COMPLETION_FILE}.tmp
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "qforge completion bash failed (${result})")
endif()
file(RENAME ${COMPLETION_FILE}.tmp ${COMPLETION_FILE})
