# SPDX-License-Identifier: MIT
# The OpenCL backend: host code in backends/opencl, OpenCL C kernels in shaders/opencl embedded
# as C strings. Only the headers are needed at build time (Debian opencl-headers); the ICD
# loader is opened at run time.
if(DEFINED FA_WITH_OPENCL AND NOT FA_WITH_OPENCL)
  message(STATUS "flashattn: opencl backend not built: FA_WITH_OPENCL is OFF")
  return()
endif()
# A cross build takes the headers from the build machine (cmake/fa_cross.cmake).
if(CMAKE_CROSSCOMPILING)
  fa_host_headers(FA_OPENCL_INCLUDE_DIR CL/cl.h CL)
endif()
find_path(FA_OPENCL_INCLUDE_DIR CL/cl.h)
if(NOT FA_OPENCL_INCLUDE_DIR)
  message(STATUS
    "flashattn: opencl backend not built: CL/cl.h not found (apt-get install opencl-headers)")
  return()
endif()
option(FA_WITH_OPENCL "Build the OpenCL backend" ON)
if(NOT FA_WITH_OPENCL)
  message(STATUS "flashattn: opencl backend not built: FA_WITH_OPENCL is OFF")
  return()
endif()

set(FA_OPENCL_GENERATED)
foreach(kernel IN ITEMS common forward backward decode)
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/opencl/fa_opencl_${kernel}_cl.c)
  fa_embed(${generated} fa_opencl_${kernel}_cl
    ${CMAKE_CURRENT_SOURCE_DIR}/shaders/opencl/fa_${kernel}.cl TEXT)
  list(APPEND FA_OPENCL_GENERATED ${generated})
endforeach()
# The option names, shared with the host (which includes it from shaders/opencl) and prepended
# to every program's source.
set(generated ${CMAKE_CURRENT_BINARY_DIR}/opencl/fa_opencl_options_h.c)
fa_embed(${generated} fa_opencl_options_h ${CMAKE_CURRENT_SOURCE_DIR}/shaders/opencl/fa_cl_options.h
  TEXT)
list(APPEND FA_OPENCL_GENERATED ${generated})
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/opencl)

file(GLOB FA_OPENCL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
set_property(SOURCE ${FA_OPENCL_SOURCES} APPEND PROPERTY INCLUDE_DIRECTORIES
  ${FA_OPENCL_INCLUDE_DIR} ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/shaders/opencl)
list(APPEND FA_BACKEND_SOURCES ${FA_OPENCL_SOURCES} ${FA_OPENCL_GENERATED})
list(APPEND FA_BACKEND_DEFINES FA_WITH_OPENCL)
string(APPEND FA_BACKEND_SUMMARY " opencl")
