# SPDX-License-Identifier: MIT
# fa_embed(<output.c> <symbol> <input> [TEXT])
# Generates at build time a C file defining
#   const unsigned char <symbol>[];  const size_t <symbol>_size;
# from <input> (a SPIR-V binary, a cubin, an OpenCL C source...). With TEXT a terminating NUL is
# appended (not counted in _size), so the array can be used as a C string.
set(FA_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/fa_embed_run.cmake)

function(fa_embed output symbol input)
  set(text OFF)
  if(ARGN STREQUAL "TEXT")
    set(text ON)
  endif()
  add_custom_command(OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -DSYMBOL=${symbol}
            -DTEXT=${text} -P ${FA_EMBED_SCRIPT}
    DEPENDS ${input} ${FA_EMBED_SCRIPT}
    COMMENT "Embedding ${input} as ${symbol}"
    VERBATIM)
endfunction()
