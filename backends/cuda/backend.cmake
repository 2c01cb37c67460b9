# SPDX-License-Identifier: MIT
# The CUDA backend: host code in C (it opens libcuda at run time and needs no toolkit headers),
# kernels in shaders/cuda compiled by nvcc into one fatbin (SASS for sm_80, sm_86, sm_89, sm_90,
# PTX for compute_90) and a second for sm_90a (the Hopper kernels), both embedded in the
# library. Built when nvcc is found, or when FA_DEVICE_CODE_FROM names a build that has both
# fatbins (cmake/fa_cross.cmake): they hold device code only, the same for every host system
# (fa_cuda_abi.h uses fixed-width types), so the Windows cross build takes the Linux build's.
find_program(FA_NVCC nvcc HINTS ENV CUDA_PATH PATH_SUFFIXES bin
  PATHS /usr/local/cuda/bin /opt/cuda/bin)
set(fa_cuda_prebuilt OFF)
if(FA_DEVICE_CODE_FROM_DIR AND EXISTS ${FA_DEVICE_CODE_FROM_DIR}/cuda/fa_kernels.fatbin
   AND EXISTS ${FA_DEVICE_CODE_FROM_DIR}/cuda/fa_kernels_sm90.fatbin)
  set(fa_cuda_prebuilt ON)
endif()
if(FA_NVCC OR fa_cuda_prebuilt)
  option(FA_WITH_CUDA "Build the CUDA backend (needs nvcc at build time only)" ON)
else()
  option(FA_WITH_CUDA "Build the CUDA backend (needs nvcc at build time only)" OFF)
endif()

if(FA_WITH_CUDA AND NOT FA_NVCC AND NOT fa_cuda_prebuilt)
  message(FATAL_ERROR "flashattn: FA_WITH_CUDA is ON but nvcc was not found (set FA_NVCC)")
elseif(NOT FA_WITH_CUDA)
  if(NOT FA_NVCC)
    message(STATUS "flashattn: cuda backend not built: nvcc not found (install the CUDA Toolkit, "
                   "or pass -DFA_NVCC=/path/to/nvcc)")
  else()
    message(STATUS "flashattn: cuda backend not built (FA_WITH_CUDA=OFF)")
  endif()
else()
  set(FA_CUDA_ARCHS 80 86 89 90 CACHE STRING "SM architectures of the embedded CUDA SASS")
  set(FA_CUDA_PTX_ARCH 90 CACHE STRING "Compute capability of the embedded CUDA PTX")
  # SASS for each architecture, from one PTX per major version: the lowest of the list's (sm_86
  # and sm_89 from compute_80). The kernels test no minor version; nvcc 13.0's sm_86 cubin
  # from compute_80 differs from compute_86's only in the byte naming the PTX's architecture,
  # and each PTX costs a front-end pass (about two minutes of CPU for fa_kernels.cu).
  # "90a"-style names keep a PTX of their own.
  set(fa_cuda_gencode)
  set(fa_cuda_numeric)
  foreach(arch IN LISTS FA_CUDA_ARCHS)
    if(arch MATCHES "^[0-9]+$")
      list(APPEND fa_cuda_numeric ${arch})
    else()
      list(APPEND fa_cuda_gencode -gencode=arch=compute_${arch},code=sm_${arch})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES fa_cuda_numeric)
  list(SORT fa_cuda_numeric COMPARE NATURAL) # each major version's lowest first
  set(fa_cuda_majors)
  foreach(arch IN LISTS fa_cuda_numeric)
    math(EXPR major "${arch} / 10")
    if(NOT major IN_LIST fa_cuda_majors)
      list(APPEND fa_cuda_majors ${major})
      set(fa_cuda_ptx_${major} ${arch})
    endif()
    list(APPEND fa_cuda_sass_${major} sm_${arch})
  endforeach()
  foreach(major IN LISTS fa_cuda_majors)
    string(JOIN "," codes ${fa_cuda_sass_${major}})
    list(APPEND fa_cuda_gencode "-gencode=arch=compute_${fa_cuda_ptx_${major}},code=[${codes}]")
  endforeach()
  list(APPEND fa_cuda_gencode
    -gencode=arch=compute_${FA_CUDA_PTX_ARCH},code=compute_${FA_CUDA_PTX_ARCH})
  # Tiling knobs seen by both the kernels and the host code that sizes their launches, e.g.
  # "FA_FWD_MMA_BK_D128=32" (shaders/cuda/fa_cuda_abi.h lists them); for timing variants.
  set(FA_CUDA_DEFINES "" CACHE STRING "Defines (NAME=VALUE;...) for the CUDA kernels and host")
  set(fa_cuda_defines)
  foreach(def IN LISTS FA_CUDA_DEFINES)
    list(APPEND fa_cuda_defines -D${def})
  endforeach()

  # The fatbins of FA_DEVICE_CODE_FROM only where that build compiled them with these options.
  set(FA_DEVICE_CODE_NO_REUSE OFF)
  if(fa_cuda_prebuilt)
    load_cache(${FA_DEVICE_CODE_FROM_DIR} READ_WITH_PREFIX fa_from_
      FA_CUDA_ARCHS FA_CUDA_PTX_ARCH FA_CUDA_DEFINES)
    foreach(option IN ITEMS FA_CUDA_ARCHS FA_CUDA_PTX_ARCH FA_CUDA_DEFINES)
      if(NOT "${fa_from_${option}}" STREQUAL "${${option}}")
        set(FA_DEVICE_CODE_NO_REUSE ON)
        message(STATUS "flashattn: the CUDA fatbins of ${FA_DEVICE_CODE_FROM_DIR} are not "
          "reused: its ${option} is '${fa_from_${option}}', this build's '${${option}}'")
      endif()
    endforeach()
    if(FA_DEVICE_CODE_NO_REUSE AND NOT FA_NVCC)
      message(FATAL_ERROR "flashattn: FA_WITH_CUDA is ON, without nvcc or fatbins to reuse")
    endif()
  endif()

  set(fa_cuda_dir ${CMAKE_CURRENT_SOURCE_DIR}/shaders/cuda)
  file(GLOB fa_cuda_deps CONFIGURE_DEPENDS ${fa_cuda_dir}/*.cu ${fa_cuda_dir}/*.cuh
    ${fa_cuda_dir}/*.h)
  set(fa_cuda_fatbin ${CMAKE_CURRENT_BINARY_DIR}/cuda/fa_kernels.fatbin)
  fa_device_code(OUTPUT ${fa_cuda_fatbin}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/cuda
    COMMAND ${FA_NVCC} -fatbin -O3 --threads 0 -std=c++17 ${fa_cuda_gencode} -Xptxas=-warn-spills
            ${fa_cuda_defines} -I${fa_cuda_dir} -o ${fa_cuda_fatbin} ${fa_cuda_dir}/fa_kernels.cu
    DEPENDS ${fa_cuda_deps}
    COMMENT "nvcc: CUDA kernels for sm_${FA_CUDA_ARCHS} + compute_${FA_CUDA_PTX_ARCH}"
    VERBATIM)
  fa_embed(${CMAKE_CURRENT_BINARY_DIR}/cuda/fa_cuda_fatbin.c fa_cuda_fatbin ${fa_cuda_fatbin})
  # The Hopper kernels (wgmma, setmaxnreg) exist for sm_90a alone: their own fatbin, which the
  # host loads beside the first on compute capability 9.0.
  set(fa_cuda_fatbin_sm90 ${CMAKE_CURRENT_BINARY_DIR}/cuda/fa_kernels_sm90.fatbin)
  fa_device_code(OUTPUT ${fa_cuda_fatbin_sm90}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/cuda
    COMMAND ${FA_NVCC} -fatbin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a
            -Xptxas=-warn-spills ${fa_cuda_defines} -I${fa_cuda_dir} -o ${fa_cuda_fatbin_sm90}
            ${fa_cuda_dir}/fa_kernels_sm90.cu
    DEPENDS ${fa_cuda_deps}
    COMMENT "nvcc: CUDA kernels for sm_90a"
    VERBATIM)
  fa_embed(${CMAKE_CURRENT_BINARY_DIR}/cuda/fa_cuda_fatbin_sm90.c fa_cuda_fatbin_sm90
    ${fa_cuda_fatbin_sm90})
  set(FA_DEVICE_CODE_NO_REUSE OFF)

  file(GLOB fa_cuda_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda/*.c)
  list(APPEND FA_BACKEND_SOURCES ${fa_cuda_sources}
    ${CMAKE_CURRENT_BINARY_DIR}/cuda/fa_cuda_fatbin.c
    ${CMAKE_CURRENT_BINARY_DIR}/cuda/fa_cuda_fatbin_sm90.c)
  list(APPEND FA_BACKEND_DEFINES FA_WITH_CUDA ${FA_CUDA_DEFINES})
  set(FA_BACKEND_SUMMARY "${FA_BACKEND_SUMMARY} cuda")
endif()
