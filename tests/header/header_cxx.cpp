// SPDX-License-Identifier: MIT
/* The public headers as C++ (C++11, -Wpedantic): built by the host's g++ and by MinGW-w64's for
 * Windows, so that its declarations stay free of C-only and GNU-only constructs. The structs must
 * have the sizes of 0.2's C layout under either compiler, and the program links against the
 * library and calls it (ctest runs it on Linux). */
#include <flashattn.h>
#include <flashattn/cpu.h>
#include <flashattn/cuda.h>
#include <flashattn/opencl.h>
#include <flashattn/vulkan.h>

#include <cstdio>

#include "../abi/flashattn_v0_2_layout.h"

#define FA_SAME_SIZE(now, old) static_assert(sizeof(now) == sizeof(old), #now " changed size")
FA_SAME_SIZE(fa_backend_info, v02_backend_info);
FA_SAME_SIZE(fa_device_info, v02_device_info);
FA_SAME_SIZE(fa_context_desc, v02_context_desc);
FA_SAME_SIZE(fa_memory_stats, v02_memory_stats);
FA_SAME_SIZE(fa_buffer_desc, v02_buffer_desc);
FA_SAME_SIZE(fa_tensor, v02_tensor);
FA_SAME_SIZE(fa_attention_desc, v02_attention_desc);
static_assert(sizeof(fa_attention_desc) == 256, "fa_attention_desc is 256 bytes on every target");

int main()
{
    fa_context_desc desc = {};
    desc.backend = FA_BACKEND_CPU;
    fa_context *ctx = nullptr;
    if (fa_context_create(&desc, &ctx) != FA_OK) {
        std::fprintf(stderr, "%s\n", fa_last_create_error());
        return 1;
    }
    const bool on_cpu = fa_context_backend(ctx) == FA_BACKEND_CPU;
    fa_context_destroy(ctx);
    std::printf("flashattn %s from C++: %s\n", fa_version_string(),
                fa_status_name(on_cpu ? FA_OK : FA_ERROR_INVALID_BACKEND));
    return on_cpu && fa_version() == FA_VERSION_HEX ? 0 : 1;
}
