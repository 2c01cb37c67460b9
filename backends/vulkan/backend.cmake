# SPDX-License-Identifier: MIT
# Vulkan backend: host code in backends/vulkan, GLSL compute shaders in shaders/vulkan compiled at
# build time to SPIR-V (glslangValidator), validated (spirv-val) and embedded as C arrays. The
# Vulkan loader is opened at run time through volk, so nothing links libvulkan.
if(DEFINED FA_WITH_VULKAN AND NOT FA_WITH_VULKAN)
  message(STATUS "flashattn: vulkan backend not built (FA_WITH_VULKAN=OFF)")
  return()
endif()
# A cross build takes the headers and volk from the build machine (cmake/fa_cross.cmake): they
# are the same for every system, and volk opens no loader here (vk_instance.c does).
if(CMAKE_CROSSCOMPILING)
  fa_host_headers(FA_VOLK_INCLUDE_DIR volk.h volk.h volk.c)
  fa_host_headers(FA_VULKAN_INCLUDE_DIR vulkan/vulkan_core.h vulkan vk_video)
endif()
find_path(FA_VOLK_INCLUDE_DIR volk.h)
find_file(FA_VOLK_SOURCE volk.c PATHS ${FA_VOLK_INCLUDE_DIR} NO_DEFAULT_PATH
  NO_CMAKE_FIND_ROOT_PATH)
find_path(FA_VULKAN_INCLUDE_DIR vulkan/vulkan_core.h)
find_program(FA_GLSLANG glslangValidator)
find_program(FA_SPIRV_VAL spirv-val)
find_program(FA_SPIRV_OPT spirv-opt)

set(fa_vk_missing)
if(NOT FA_VOLK_INCLUDE_DIR OR NOT FA_VOLK_SOURCE)
  list(APPEND fa_vk_missing "volk.h/volk.c (libvulkan-volk-dev)")
endif()
if(NOT FA_VULKAN_INCLUDE_DIR)
  list(APPEND fa_vk_missing "Vulkan headers (libvulkan-dev)")
endif()
if(NOT FA_GLSLANG)
  list(APPEND fa_vk_missing "glslangValidator (glslang-tools)")
endif()
if(NOT FA_SPIRV_VAL)
  list(APPEND fa_vk_missing "spirv-val (spirv-tools)")
endif()
if(fa_vk_missing)
  set(fa_vk_default OFF)
else()
  set(fa_vk_default ON)
endif()
option(FA_WITH_VULKAN "Build the Vulkan backend" ${fa_vk_default})

if(FA_WITH_VULKAN AND fa_vk_missing)
  list(JOIN fa_vk_missing ", " fa_vk_missing_text)
  message(FATAL_ERROR "flashattn: FA_WITH_VULKAN=ON but missing: ${fa_vk_missing_text}")
elseif(NOT FA_WITH_VULKAN)
  if(fa_vk_missing)
    list(JOIN fa_vk_missing ", " fa_vk_missing_text)
    message(STATUS "flashattn: vulkan backend not built: missing ${fa_vk_missing_text}")
  else()
    message(STATUS "flashattn: vulkan backend not built (FA_WITH_VULKAN=OFF)")
  endif()
else()
  set(fa_vk_shader_dir ${CMAKE_CURRENT_SOURCE_DIR}/shaders/vulkan)
  set(fa_vk_out ${CMAKE_CURRENT_BINARY_DIR}/shaders/vulkan)
  file(MAKE_DIRECTORY ${fa_vk_out})
  # Storage variants: suffix and glslang defines (see shaders/vulkan/fa_common.glsl).
  set(fa_vk_variants f32 f16_s16 bf16_s16 f16_words bf16_words)
  set(fa_vk_defines_f32 -DDTYPE_F32)
  set(fa_vk_defines_f16_s16 -DDTYPE_F16 -DSTORAGE16)
  set(fa_vk_defines_bf16_s16 -DDTYPE_BF16 -DSTORAGE16)
  set(fa_vk_defines_f16_words -DDTYPE_F16)
  set(fa_vk_defines_bf16_words -DDTYPE_BF16)
  set(fa_vk_generated)
  foreach(kernel IN ITEMS attn_fwd attn_bwd_prep attn_bwd_dkdv attn_bwd_dq attn_decode attn_merge)
    foreach(variant IN LISTS fa_vk_variants)
      set(spv ${fa_vk_out}/${kernel}_${variant}.spv)
      fa_device_code(OUTPUT ${spv}
        COMMAND ${FA_GLSLANG} -V --target-env vulkan1.1 ${fa_vk_defines_${variant}}
                -I${fa_vk_shader_dir} -o ${spv} ${fa_vk_shader_dir}/${kernel}.comp
        COMMAND ${FA_SPIRV_VAL} --target-env vulkan1.1 ${spv}
        DEPENDS ${fa_vk_shader_dir}/${kernel}.comp ${fa_vk_shader_dir}/fa_common.glsl
                ${fa_vk_shader_dir}/fa_params.glsl ${fa_vk_shader_dir}/fa_backward.glsl
                ${fa_vk_shader_dir}/fa_bias.glsl
                ${fa_vk_shader_dir}/fa_spec_ids.h
        COMMENT "Compiling and validating ${kernel} (${variant}) to SPIR-V"
        VERBATIM)
      fa_embed(${fa_vk_out}/${kernel}_${variant}.c fa_spv_${kernel}_${variant} ${spv})
      list(APPEND fa_vk_generated ${fa_vk_out}/${kernel}_${variant}.c)
    endforeach()
  endforeach()
  # The decoding forward once more with its subgroup size fixed at 32 and its loops unrolled by
  # spirv-opt, so that no register array is left for NVIDIA's driver to keep in local memory
  # (FA_DEC_FIXED_SG in attn_decode.comp; docs/PERF.md). Without spirv-opt the module is built
  # as compiled: correct, slower there.
  foreach(variant IN LISTS fa_vk_variants)
    set(spv ${fa_vk_out}/attn_decode_sg32_${variant}.spv)
    if(FA_SPIRV_OPT)
      set(fa_vk_unroll COMMAND ${FA_SPIRV_OPT} --loop-unroll -O --loop-unroll -O ${spv}.raw -o ${spv})
    else()
      set(fa_vk_unroll COMMAND ${CMAKE_COMMAND} -E copy ${spv}.raw ${spv})
    endif()
    fa_device_code(OUTPUT ${spv}
      COMMAND ${FA_GLSLANG} -V --target-env vulkan1.1 ${fa_vk_defines_${variant}}
              -DFA_DEC_FIXED_SG=32 -I${fa_vk_shader_dir} -o ${spv}.raw
              ${fa_vk_shader_dir}/attn_decode.comp
      ${fa_vk_unroll}
      COMMAND ${FA_SPIRV_VAL} --target-env vulkan1.1 ${spv}
      DEPENDS ${fa_vk_shader_dir}/attn_decode.comp ${fa_vk_shader_dir}/fa_common.glsl
              ${fa_vk_shader_dir}/fa_params.glsl ${fa_vk_shader_dir}/fa_spec_ids.h
      COMMENT "Compiling, unrolling and validating attn_decode_sg32 (${variant})"
      VERBATIM)
    fa_embed(${fa_vk_out}/attn_decode_sg32_${variant}.c fa_spv_attn_decode_sg32_${variant} ${spv})
    list(APPEND fa_vk_generated ${fa_vk_out}/attn_decode_sg32_${variant}.c)
  endforeach()
  # And with a subgroup's K rows read unit by unit and staged through 32 KiB more of shared
  # memory (FA_DEC_STAGE_K: +12-35 % on long caches on an H100, docs/PERF.md), in f16 with
  # 16-bit storage, where vk_decode_plan.c finds the memory for it.
  set(spv ${fa_vk_out}/attn_decode_staged_f16_s16.spv)
  fa_device_code(OUTPUT ${spv}
    COMMAND ${FA_GLSLANG} -V --target-env vulkan1.1 ${fa_vk_defines_f16_s16} -DFA_DEC_STAGE_K
            -I${fa_vk_shader_dir} -o ${spv} ${fa_vk_shader_dir}/attn_decode.comp
    COMMAND ${FA_SPIRV_VAL} --target-env vulkan1.1 ${spv}
    DEPENDS ${fa_vk_shader_dir}/attn_decode.comp ${fa_vk_shader_dir}/fa_common.glsl
            ${fa_vk_shader_dir}/fa_params.glsl ${fa_vk_shader_dir}/fa_spec_ids.h
    COMMENT "Compiling and validating attn_decode_staged (f16_s16)"
    VERBATIM)
  fa_embed(${fa_vk_out}/attn_decode_staged_f16_s16.c fa_spv_attn_decode_staged_f16_s16 ${spv})
  list(APPEND fa_vk_generated ${fa_vk_out}/attn_decode_staged_f16_s16.c)
  include(${CMAKE_CURRENT_LIST_DIR}/matrix_shaders.cmake)

  file(GLOB fa_vk_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/backends/vulkan/*.c)
  # volk.c is compiled into the backend: the loader is opened by volkInitialize at run time.
  set(fa_vk_volk ${fa_vk_out}/volk_impl.c)
  file(WRITE ${fa_vk_volk}.in "#define VK_NO_PROTOTYPES\n#include <volk.c>\n")
  configure_file(${fa_vk_volk}.in ${fa_vk_volk} COPYONLY)
  set_source_files_properties(${fa_vk_volk} PROPERTIES COMPILE_OPTIONS "-w")
  set_source_files_properties(${fa_vk_generated} PROPERTIES GENERATED TRUE)
  list(APPEND FA_BACKEND_SOURCES ${fa_vk_sources} ${fa_vk_volk} ${fa_vk_generated})
  list(APPEND FA_BACKEND_DEFINES FA_WITH_VULKAN VK_NO_PROTOTYPES)
  set_property(SOURCE ${fa_vk_sources} ${fa_vk_volk} APPEND PROPERTY INCLUDE_DIRECTORIES
    ${FA_VOLK_INCLUDE_DIR} ${FA_VULKAN_INCLUDE_DIR} ${fa_vk_shader_dir})
  string(APPEND FA_BACKEND_SUMMARY " vulkan")
endif()
