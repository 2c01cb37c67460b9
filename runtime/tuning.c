// SPDX-License-Identifier: MIT
/* The developer knobs, read once per context (fa_tuning.h). */
#include "fa_tuning.h"

#include "fa_platform.h"

#include <stdlib.h>
#include <string.h>

static const char *const knob_names[FA_KNOB_COUNT] = {
#define FA_KNOB_NAME_(name) "FA_" #name,
    FA_KNOBS(FA_KNOB_NAME_)
#undef FA_KNOB_NAME_
};

bool fa_tuning_read(fa_tuning *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < FA_KNOB_COUNT; i++) {
        if (!fa_env_get(knob_names[i], &t->value[i])) {
            fa_tuning_free(t);
            return false;
        }
    }
    return true;
}

void fa_tuning_free(fa_tuning *t)
{
    for (int i = 0; i < FA_KNOB_COUNT; i++) {
        free(t->value[i]);
        t->value[i] = NULL;
    }
}
