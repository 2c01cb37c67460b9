// SPDX-License-Identifier: MIT
/* The public structs as flashattn 0.2 laid them out, frozen under other names: a program
 * compiled against 0.2's header sees exactly these. tests/test_abi_layout.c checks that the
 * current header keeps every one of these fields at the same offset with the same size, and
 * calls the library through them. Never edit this file; a later version line adds its own. */
#ifndef FA_V0_2_LAYOUT_H
#define FA_V0_2_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct v02_backend_info {
    int backend;
    const char *name;
    bool built;
    bool available;
    int device_count;
    char reason[256];
    uint64_t reserved[8];
} v02_backend_info;

typedef struct v02_device_info {
    int backend;
    int index;
    int kind;
    char name[128];
    char vendor[64];
    char driver[64];
    char api_version[32];
    int api_major, api_minor;
    uint64_t memory_bytes;
    uint64_t max_buffer_bytes;
    uint32_t compute_units;
    uint32_t shared_memory_bytes;
    uint32_t max_workgroup_size;
    uint32_t subgroup_size_min, subgroup_size_max;
    bool f16;
    bool bf16;
    bool matrix_units;
    char kernels[128];
    uint64_t reserved[16];
} v02_device_info;

typedef struct v02_context_desc {
    int backend;
    int device;
    void (*log)(void *, int, const char *);
    void *log_user_data;
    int log_level;
    int cpu_threads;
    void *cuda_stream;
    const char *cache_dir;
    uint64_t cache_max_bytes;
    uint64_t reserved[8];
} v02_context_desc;

typedef struct v02_memory_stats {
    uint64_t buffer_bytes;
    uint64_t buffer_peak_bytes;
    uint64_t workspace_bytes;
    uint64_t workspace_peak_bytes;
    uint64_t reserved[4];
} v02_memory_stats;

typedef struct v02_buffer_desc {
    size_t size;
    const void *data;
    uint64_t reserved[4];
} v02_buffer_desc;

typedef struct v02_tensor {
    void *buffer;
    uint64_t offset;
    int dtype;
    int64_t shape[4];
    int64_t stride[4];
} v02_tensor;

typedef struct v02_attention_desc {
    float scale;
    bool causal;
    bool deterministic;
    int32_t num_splits;
    uint64_t reserved[30];
} v02_attention_desc;

#endif
