// SPDX-License-Identifier: MIT
/* Finding OpenCL platforms and devices once per process, and describing each as fa_device_info. */
#include "opencl_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PLATFORMS = 16, MAX_DEVICES = 64 };

static fa_cl_device devices[MAX_DEVICES];
static int device_total;

static void device_string(cl_device_id dev, cl_device_info what, char *out, size_t size)
{
    out[0] = '\0';
    if (fa_cl.clGetDeviceInfo(dev, what, size, out, NULL) != CL_SUCCESS)
        out[0] = '\0';
    out[size - 1] = '\0';
}

static uint64_t device_u64(cl_device_id dev, cl_device_info what)
{
    cl_ulong v = 0;
    return fa_cl.clGetDeviceInfo(dev, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static uint32_t device_u32(cl_device_id dev, cl_device_info what)
{
    cl_uint v = 0;
    return fa_cl.clGetDeviceInfo(dev, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

/* Whether the space-separated extension list names `ext` exactly. */
static bool has_extension(const char *list, const char *ext)
{
    size_t n = strlen(ext);
    for (const char *p = strstr(list, ext); p; p = strstr(p + 1, ext))
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

static void describe(fa_cl_device *d)
{
    cl_device_id dev = d->id;
    fa_device_info *info = &d->info;
    char version[128], ext[8192];
    cl_device_type type = 0;
    cl_bool unified = CL_FALSE;
    size_t wg = 0;

    memset(info, 0, sizeof *info);
    info->backend = FA_BACKEND_OPENCL;
    device_string(dev, CL_DEVICE_NAME, info->name, sizeof info->name);
    device_string(dev, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    device_string(dev, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    device_string(dev, CL_DEVICE_VERSION, version, sizeof version);
    device_string(dev, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    fa_cl.clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    fa_cl.clGetDeviceInfo(dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    fa_cl.clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);

    if (type & CL_DEVICE_TYPE_GPU)
        info->kind = unified ? FA_DEVICE_KIND_INTEGRATED_GPU : FA_DEVICE_KIND_DISCRETE_GPU;
    else if (type & (CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_ACCELERATOR))
        info->kind = FA_DEVICE_KIND_SOFTWARE;
    else
        info->kind = FA_DEVICE_KIND_OTHER;

    /* CL_DEVICE_VERSION reads "OpenCL <major>.<minor> <vendor text>". */
    int major = 0, minor = 0;
    if (sscanf(version, "OpenCL %d.%d", &major, &minor) == 2) {
        info->api_major = major;
        info->api_minor = minor;
    }
    snprintf(info->api_version, sizeof info->api_version, "OpenCL %d.%d", major, minor);
    info->memory_bytes = device_u64(dev, CL_DEVICE_GLOBAL_MEM_SIZE);
    info->max_buffer_bytes = device_u64(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    info->compute_units = device_u32(dev, CL_DEVICE_MAX_COMPUTE_UNITS);
    d->local_mem_bytes = device_u64(dev, CL_DEVICE_LOCAL_MEM_SIZE);
    info->shared_memory_bytes =
        d->local_mem_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)d->local_mem_bytes;
    d->max_workgroup = wg;
    info->max_workgroup_size = wg > UINT32_MAX ? UINT32_MAX : (uint32_t)wg;
    info->f16 = has_extension(ext, "cl_khr_fp16");
    d->fp64 = has_extension(ext, "cl_khr_fp64");
    d->nv_compiler_options = has_extension(ext, "cl_nv_compiler_options");
    /* bf16 is converted by bit manipulation in the kernels, never native here. */
}

bool fa_cl_probe(int *device_count, char *reason, size_t reason_size)
{
    *device_count = 0;
    if (!fa_cl_load(reason, reason_size))
        return false;
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint nplat = 0;
    cl_int err = fa_cl.clGetPlatformIDs(MAX_PLATFORMS, platforms, &nplat);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && nplat == 0)) {
        snprintf(reason, reason_size, "no OpenCL platform (no ICD registered in /etc/OpenCL)");
        return false;
    }
    if (err != CL_SUCCESS) {
        snprintf(reason, reason_size, "clGetPlatformIDs: %s (%d)", fa_cl_error_name(err), err);
        return false;
    }
    if (nplat > MAX_PLATFORMS)
        nplat = MAX_PLATFORMS;
    device_total = 0;
    for (cl_uint p = 0; p < nplat && device_total < MAX_DEVICES; p++) {
        cl_device_id ids[MAX_DEVICES];
        cl_uint n = 0;
        if (fa_cl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, ids, &n) !=
            CL_SUCCESS)
            continue;
        for (cl_uint i = 0; i < n && i < MAX_DEVICES && device_total < MAX_DEVICES; i++) {
            fa_cl_device *d = &devices[device_total];
            cl_bool avail = CL_TRUE, compiler = CL_TRUE;
            fa_cl.clGetDeviceInfo(ids[i], CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL);
            fa_cl.clGetDeviceInfo(ids[i], CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler,
                                  NULL);
            if (!avail || !compiler)
                continue; /* kernels are built at run time: no compiler, no use */
            d->platform = platforms[p];
            d->id = ids[i];
            describe(d);
            device_total++;
        }
    }
    if (device_total == 0) {
        snprintf(reason, reason_size,
                 "%u OpenCL platform(s) but no available device with a compiler", nplat);
        return false;
    }
    *device_count = device_total;
    return true;
}

const fa_cl_device *fa_cl_device_get(int index)
{
    return index >= 0 && index < device_total ? &devices[index] : NULL;
}

void fa_cl_device_info(int index, fa_device_info *out)
{
    const fa_cl_device *d = fa_cl_device_get(index);
    if (d)
        *out = d->info;
}
