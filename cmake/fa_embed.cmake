# SPDX-License-Identifier: MIT
# fa_embed(<output.c> <symbol> <input> [TEXT])
# Generates at build time a C file defining
#   const unsigned char <symbol>[];  const size_t <symbol>_size;
# from <input> (a SPIR-V binary, a cubin, an OpenCL C source...). With TEXT a terminating NUL is
# appended (not counted in _size), so the array can be used as a C string.
#
# Where the C compiler's assembler has .incbin (GNU as, LLVM's integrated assembler; checked
# once below by compiling and linking a probe), the C file is a few lines that make the
# assembler read <input> itself; else it spells every byte as an array initialiser, which for
# the 11 MB CUDA fatbin costs about 25 s to write and 50 s to compile on a 2-core machine.
# FA_EMBED_INCBIN=OFF forces the array.
set(FA_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/fa_embed_run.cmake)

if(NOT DEFINED FA_EMBED_INCBIN)
  set(fa_probe_dir ${CMAKE_BINARY_DIR}/fa_embed_probe)
  file(MAKE_DIRECTORY ${fa_probe_dir})
  file(WRITE ${fa_probe_dir}/probe.txt "flashattn")
  execute_process(COMMAND ${CMAKE_COMMAND} -DINPUT=${fa_probe_dir}/probe.txt
    -DOUTPUT=${fa_probe_dir}/embedded.c -DSYMBOL=fa_embed_probe -DTEXT=ON -DINCBIN=ON
    -P ${FA_EMBED_SCRIPT} RESULT_VARIABLE fa_probe_rc)
  file(WRITE ${fa_probe_dir}/main.c [[
#include <stddef.h>
#include <string.h>
extern const unsigned char fa_embed_probe[];
extern const size_t fa_embed_probe_size;
int main(void) { return fa_embed_probe_size == 9 && !strcmp((const char *)fa_embed_probe, "flashattn") ? 0 : 1; }
]])
  # try_compile and try_run leave their results in the cache (hence no plain variable of the
  # same names here).
  set(fa_probe_ok OFF)
  if(fa_probe_rc EQUAL 0)
    try_compile(fa_embed_probe_compiles ${fa_probe_dir}/build
      SOURCES ${fa_probe_dir}/main.c ${fa_probe_dir}/embedded.c)
    set(fa_probe_ok ${fa_embed_probe_compiles})
  endif()
  if(fa_probe_ok AND NOT CMAKE_CROSSCOMPILING)
    try_run(fa_embed_probe_exit fa_embed_probe_builds ${fa_probe_dir}/build
      SOURCES ${fa_probe_dir}/main.c ${fa_probe_dir}/embedded.c)
    if(NOT fa_embed_probe_exit EQUAL 0)
      set(fa_probe_ok OFF)
    endif()
  endif()
  set(FA_EMBED_INCBIN ${fa_probe_ok} CACHE BOOL
    "Embed binaries with the assembler's .incbin (else as C array initialisers)")
  if(FA_EMBED_INCBIN)
    message(STATUS "flashattn: embedding binaries with .incbin")
  else()
    message(STATUS "flashattn: embedding binaries as C arrays (the assembler has no .incbin)")
  endif()
endif()

function(fa_embed output symbol input)
  set(text OFF)
  if(ARGN STREQUAL "TEXT")
    set(text ON)
  endif()
  add_custom_command(OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -DSYMBOL=${symbol}
            -DTEXT=${text} -DINCBIN=${FA_EMBED_INCBIN} -P ${FA_EMBED_SCRIPT}
    DEPENDS ${input} ${FA_EMBED_SCRIPT}
    COMMENT "Embedding ${input} as ${symbol}"
    VERBATIM)
endfunction()
