# SPDX-License-Identifier: MIT
# Helpers for cross builds (the Windows build made on Linux with MinGW-w64, README: Windows).
#
# fa_host_headers(<VAR> <file> <item>...)
#   The MinGW-w64 tree has neither Vulkan's nor OpenCL's headers, and Debian installs them for
#   Linux under /usr/include, beside glibc's, which a cross compiler must not see. When <VAR> is
#   not set, this finds <file> under FA_HOST_INCLUDE_PATH and copies the named items (folders or
#   files beside it; of folders, the C headers only) into <build>/host-headers, which it stores
#   in the cache variable <VAR>. The headers of these APIs are the same for every system: they
#   choose their calling conventions from the compiler's own macros.
#
# fa_device_code(OUTPUT <file> <add_custom_command arguments>...)
#   add_custom_command for device code (SPIR-V modules, CUDA fatbins), which is the same whatever
#   system the library is built for. With FA_DEVICE_CODE_FROM naming another build folder of the
#   same source tree (say the Linux build, for the Windows one), a file that folder has at the
#   same place when this build is configured is copied from it instead of compiled, which saves
#   the cross build minutes of glslangValidator and nvcc; the copy is made again whenever that
#   build remakes the file.
#   FA_DEVICE_CODE_FROM is for a build made from the same sources and options: the CUDA backend
#   compares its options (backends/cuda/backend.cmake); keep that build up to date
#   (tools/windows-check.sh builds it first).

set(FA_HOST_INCLUDE_PATH /usr/local/include /usr/include CACHE STRING
  "Where a cross build looks for the build machine's Vulkan, volk and OpenCL headers")

function(fa_host_headers var file)
  if(${var})
    return()
  endif()
  find_path(fa_host_dir_${var} ${file} PATHS ${FA_HOST_INCLUDE_PATH} NO_DEFAULT_PATH
    NO_CMAKE_FIND_ROOT_PATH)
  set(host_dir ${fa_host_dir_${var}})
  unset(fa_host_dir_${var} CACHE)
  if(NOT host_dir)
    return()
  endif()
  set(out ${PROJECT_BINARY_DIR}/host-headers)
  foreach(item IN LISTS ARGN)
    if(IS_DIRECTORY ${host_dir}/${item})
      file(COPY ${host_dir}/${item} DESTINATION ${out} FILES_MATCHING PATTERN "*.h")
    elseif(EXISTS ${host_dir}/${item})
      file(COPY ${host_dir}/${item} DESTINATION ${out})
    endif()
  endforeach()
  list(JOIN ARGN ", " items)
  message(STATUS "flashattn: copied from ${host_dir} into ${out}: ${items}")
  set(${var} ${out} CACHE PATH "${file}'s folder (copied from the build machine's)" FORCE)
endfunction()

set(FA_DEVICE_CODE_FROM "" CACHE PATH
  "A build folder of the same sources whose compiled SPIR-V and CUDA fatbins are copied, not compiled again")
if(FA_DEVICE_CODE_FROM)
  get_filename_component(fa_from ${FA_DEVICE_CODE_FROM} ABSOLUTE)
  if(NOT EXISTS ${fa_from}/CMakeCache.txt)
    message(FATAL_ERROR "FA_DEVICE_CODE_FROM: ${fa_from} is not a configured build folder")
  endif()
  load_cache(${fa_from} READ_WITH_PREFIX fa_from_ CMAKE_HOME_DIRECTORY)
  get_filename_component(fa_from_src "${fa_from_CMAKE_HOME_DIRECTORY}" REALPATH)
  get_filename_component(fa_this_src "${PROJECT_SOURCE_DIR}" REALPATH)
  if(NOT fa_from_src STREQUAL fa_this_src)
    message(FATAL_ERROR "FA_DEVICE_CODE_FROM: ${fa_from} is a build of ${fa_from_src}, "
      "not of ${fa_this_src}")
  endif()
  set(FA_DEVICE_CODE_FROM_DIR ${fa_from})
  message(STATUS "flashattn: device code that ${fa_from} has is copied from there")
endif()

function(fa_device_code keyword output)
  if(NOT keyword STREQUAL "OUTPUT")
    message(FATAL_ERROR "fa_device_code: OUTPUT <file> first")
  endif()
  set(from "")
  if(FA_DEVICE_CODE_FROM_DIR AND NOT FA_DEVICE_CODE_NO_REUSE)
    file(RELATIVE_PATH rel ${PROJECT_BINARY_DIR} ${output})
    set(from ${FA_DEVICE_CODE_FROM_DIR}/${rel})
  endif()
  if(from AND EXISTS ${from})
    get_filename_component(dir ${output} DIRECTORY)
    add_custom_command(OUTPUT ${output}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
      COMMAND ${CMAKE_COMMAND} -E copy ${from} ${output}
      DEPENDS ${from}
      COMMENT "Copying ${rel} from ${FA_DEVICE_CODE_FROM_DIR}"
      VERBATIM)
  else()
    add_custom_command(OUTPUT ${output} ${ARGN})
  endif()
endfunction()
