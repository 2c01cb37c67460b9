# SPDX-License-Identifier: MIT
# Fails when docs/CUDA_KERNELS.md is not what cuda_kernel_map prints now (MAP: the program, DOC:
# the document, OUT: where the fresh output goes).
execute_process(COMMAND ${MAP} OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${MAP} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${DOC} RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "${DOC} is stale: regenerate it with ${MAP} > ${DOC} (fresh output: ${OUT})")
endif()
message(STATUS "${DOC} matches the catalogue and the planner")
