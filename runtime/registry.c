// SPDX-License-Identifier: MIT
/* The backend registry: the one place that knows which backends were built. Each backend is
 * probed (driver loaded, devices counted) once per process, on first use. */
#include "fa_internal.h"
#include "fa_platform.h"

#include <stdio.h>
#include <string.h>

#if defined(FA_WITH_CUDA)
extern const fa_backend_iface fa_cuda_backend_iface;
#endif
#if defined(FA_WITH_VULKAN)
extern const fa_backend_iface fa_vulkan_backend_iface;
#endif
#if defined(FA_WITH_OPENCL)
extern const fa_backend_iface fa_opencl_backend_iface;
#endif
extern const fa_backend_iface fa_cpu_backend_iface;

static const fa_backend_iface *const built[FA_BACKEND_COUNT] = {
#if defined(FA_WITH_CUDA)
    [FA_BACKEND_CUDA] = &fa_cuda_backend_iface,
#endif
#if defined(FA_WITH_VULKAN)
    [FA_BACKEND_VULKAN] = &fa_vulkan_backend_iface,
#endif
#if defined(FA_WITH_OPENCL)
    [FA_BACKEND_OPENCL] = &fa_opencl_backend_iface,
#endif
    [FA_BACKEND_CPU] = &fa_cpu_backend_iface,
};

typedef struct probe_state {
    bool probed;
    bool available;
    int device_count;
    char reason[256];
} probe_state;

static fa_mutex probe_lock = FA_MUTEX_INIT;
static probe_state probes[FA_BACKEND_COUNT];

const fa_backend_iface *fa_registry_get(fa_backend backend)
{
    if ((unsigned)backend >= FA_BACKEND_COUNT)
        return NULL;
    return built[backend];
}

static const probe_state *probe(fa_backend backend)
{
    probe_state *p = &probes[backend];
    fa_mutex_lock(&probe_lock);
    if (!p->probed) {
        const fa_backend_iface *iface = built[backend];
        if (!iface) {
            snprintf(p->reason, sizeof p->reason, "not built into this library");
        } else {
            p->available = iface->probe(&p->device_count, p->reason, sizeof p->reason);
            if (!p->available && !p->reason[0])
                snprintf(p->reason, sizeof p->reason, "unavailable");
            if (p->available && p->device_count <= 0) {
                p->available = false;
                snprintf(p->reason, sizeof p->reason, "no device");
            }
            if (p->available)
                p->reason[0] = '\0';
            else
                p->device_count = 0;
        }
        p->probed = true;
    }
    fa_mutex_unlock(&probe_lock);
    return p;
}

fa_status fa_backend_query(fa_backend backend, fa_backend_info *out)
{
    if (!out)
        return FA_ERROR_NULL_POINTER;
    if (backend == FA_BACKEND_AUTO || (unsigned)backend >= FA_BACKEND_COUNT)
        return FA_ERROR_INVALID_BACKEND;
    const probe_state *p = probe(backend);
    memset(out, 0, sizeof *out);
    out->backend = backend;
    out->name = fa_backend_name(backend);
    out->built = built[backend] != NULL;
    out->available = p->available;
    out->device_count = p->device_count;
    snprintf(out->reason, sizeof out->reason, "%s", p->reason);
    return FA_OK;
}

fa_status fa_device_query(fa_backend backend, int index, fa_device_info *out)
{
    if (!out)
        return FA_ERROR_NULL_POINTER;
    if (backend == FA_BACKEND_AUTO || (unsigned)backend >= FA_BACKEND_COUNT)
        return FA_ERROR_INVALID_BACKEND;
    const probe_state *p = probe(backend);
    if (!built[backend])
        return FA_ERROR_BACKEND_NOT_BUILT;
    if (!p->available)
        return FA_ERROR_BACKEND_UNAVAILABLE;
    if (index < 0 || index >= p->device_count)
        return FA_ERROR_INVALID_DEVICE;
    memset(out, 0, sizeof *out);
    built[backend]->device_info(index, out);
    out->backend = backend;
    out->index = index;
    return FA_OK;
}
