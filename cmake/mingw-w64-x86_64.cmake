# SPDX-License-Identifier: MIT
# Cross-compiling for 64-bit Windows with MinGW-w64 (Debian: gcc-mingw-w64-x86-64, and
# g++-mingw-w64-x86-64 for the C++ header check):
#   cmake -B build-win -G Ninja --toolchain cmake/mingw-w64-x86_64.cmake
# Headers and libraries come from the MinGW-w64 tree only; the GPU backends copy the few headers
# they need from the build machine (cmake/fa_cross.cmake, README: Windows).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(FA_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${FA_MINGW_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FA_MINGW_TRIPLE}-g++)
set(CMAKE_RC_COMPILER ${FA_MINGW_TRIPLE}-windres)

set(CMAKE_FIND_ROOT_PATH /usr/${FA_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config likewise: the build machine's .pc files (Criterion's, say) describe Linux libraries.
set(ENV{PKG_CONFIG_LIBDIR} ${CMAKE_FIND_ROOT_PATH}/lib/pkgconfig)
