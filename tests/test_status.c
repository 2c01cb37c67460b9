// SPDX-License-Identifier: MIT
/* The status table, names, version and enum helpers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "flashattn.h"

Test(status, every_status_has_a_distinct_name_and_sentence)
{
    static const fa_status all[] = {
#define FA_TEST_STATUS_(name, value, message) FA_##name,
        FA_STATUS_TABLE(FA_TEST_STATUS_)
#undef FA_TEST_STATUS_
    };
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_neq(fa_status_name(all[i]), "UNKNOWN_STATUS");
        cr_assert_str_neq(fa_status_string(all[i]), "unknown status");
        for (size_t j = i + 1; j < n; j++) {
            cr_assert_neq(all[i], all[j]);
            cr_assert_str_neq(fa_status_name(all[i]), fa_status_name(all[j]));
        }
        if (all[i] != FA_OK)
            cr_assert_lt(all[i], 0, "%s must be negative", fa_status_name(all[i]));
    }
}

Test(status, names_match_the_enum)
{
    cr_assert_str_eq(fa_status_name(FA_OK), "OK");
    cr_assert_str_eq(fa_status_name(FA_ERROR_SHAPE_MISMATCH), "ERROR_SHAPE_MISMATCH");
    cr_assert_str_eq(fa_status_string(FA_ERROR_OUT_OF_DEVICE_MEMORY), "out of device memory");
}

Test(status, unknown_values_are_named_unknown)
{
    cr_assert_str_eq(fa_status_name((fa_status)12345), "UNKNOWN_STATUS");
    cr_assert_str_eq(fa_status_string((fa_status)-999), "unknown status");
}

Test(status, groups_are_ordered_by_tens)
{
    cr_assert(FA_ERROR_INVALID_ARGUMENT <= -1 && FA_ERROR_INVALID_GQA > -20);
    cr_assert(FA_ERROR_UNSUPPORTED_HEAD_DIM <= -20 && FA_ERROR_UNSUPPORTED_HEAD_DIM > -30);
    cr_assert(FA_ERROR_BACKEND_UNAVAILABLE <= -30 && FA_ERROR_NO_DEVICE > -40);
    cr_assert(FA_ERROR_OUT_OF_HOST_MEMORY <= -40 && FA_ERROR_OUT_OF_DEVICE_MEMORY > -50);
    cr_assert(FA_ERROR_DEVICE <= -50 && FA_ERROR_CONTEXT_LOST > -60);
}

Test(version, string_matches_macros)
{
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", FA_VERSION_MAJOR, FA_VERSION_MINOR,
             FA_VERSION_PATCH);
    cr_assert_str_eq(fa_version_string(), expected);
    cr_assert_eq(fa_version(), (unsigned)FA_VERSION_HEX);
}

Test(dtype, names_and_sizes)
{
    cr_assert_str_eq(fa_dtype_name(FA_DTYPE_F32), "f32");
    cr_assert_str_eq(fa_dtype_name(FA_DTYPE_F16), "f16");
    cr_assert_str_eq(fa_dtype_name(FA_DTYPE_BF16), "bf16");
    cr_assert_str_eq(fa_dtype_name(FA_DTYPE_INVALID), "invalid");
    cr_assert_eq(fa_dtype_size(FA_DTYPE_F32), 4);
    cr_assert_eq(fa_dtype_size(FA_DTYPE_F16), 2);
    cr_assert_eq(fa_dtype_size(FA_DTYPE_BF16), 2);
    cr_assert_eq(fa_dtype_size((fa_dtype)77), 0);
}

Test(backend, names_round_trip)
{
    for (int b = 0; b < FA_BACKEND_COUNT; b++) {
        fa_backend parsed;
        cr_assert_eq(fa_backend_from_name(fa_backend_name((fa_backend)b), &parsed), FA_OK);
        cr_assert_eq(parsed, (fa_backend)b);
    }
    fa_backend parsed;
    cr_assert_eq(fa_backend_from_name("VuLkAn", &parsed), FA_OK);
    cr_assert_eq(parsed, FA_BACKEND_VULKAN);
    cr_assert_eq(fa_backend_from_name("metal", &parsed), FA_ERROR_INVALID_BACKEND);
    cr_assert_eq(fa_backend_from_name("cud", &parsed), FA_ERROR_INVALID_BACKEND);
    cr_assert_eq(fa_backend_from_name("cudax", &parsed), FA_ERROR_INVALID_BACKEND);
    cr_assert_eq(fa_backend_from_name(NULL, &parsed), FA_ERROR_NULL_POINTER);
    cr_assert_str_eq(fa_backend_name((fa_backend)99), "unknown");
}
