// SPDX-License-Identifier: MIT
/* Stands in for an application's own copy of volk: the same global names as the library's. */
void *vkCreateInstance = 0;
void *vkGetInstanceProcAddr = 0;
int volkInitialize(void)
{
    return 0;
}
