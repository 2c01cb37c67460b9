// SPDX-License-Identifier: MIT
/* Opening shared libraries at run time, so that no backend links a GPU runtime. */
#ifndef FA_DYNLIB_H
#define FA_DYNLIB_H

#include <stddef.h>

typedef struct fa_dynlib fa_dynlib;

/* Opens the first of `names` (NULL-terminated) that loads. On failure returns NULL and writes
 * the loader's message for the last name tried into `reason`. */
fa_dynlib *fa_dynlib_open(const char *const *names, char *reason, size_t reason_size);
/* The address of `symbol`, or NULL when the library lacks it. */
void *fa_dynlib_symbol(fa_dynlib *lib, const char *symbol);
void fa_dynlib_close(fa_dynlib *lib);

#endif
