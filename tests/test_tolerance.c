/* The tolerance rule's one-ulp floor: only the two dtype values bracketing the exact value pass
 * by it, at every magnitude, sign and dtype. */
#include "fa_testkit.h"

#include <criterion/criterion.h>
#include <math.h>

Test(tolerance, the_bracketing_values_are_faithful)
{
    /* the bf16 dQ of the failing causal case: exact 2.67084 lies between 2.65625 and 2.671875 */
    cr_assert(fa_testkit_faithful(FA_DTYPE_BF16, 2.65625, 2.67084));
    cr_assert(fa_testkit_faithful(FA_DTYPE_BF16, 2.671875, 2.67084));
    cr_assert(fa_testkit_faithful(FA_DTYPE_BF16, -2.65625, -2.67084));
    cr_assert(fa_testkit_faithful(FA_DTYPE_F16, 1.0 + 0x1p-10, 1.0 + 0x1p-11));
    cr_assert(fa_testkit_faithful(FA_DTYPE_F16, 1.0, 1.0 + 0x1p-11));
    cr_assert(fa_testkit_faithful(FA_DTYPE_F32, 1.0, 1.0 + 0x1p-30));
    cr_assert(fa_testkit_faithful(FA_DTYPE_F16, 0x1p-24, 0x1.8p-25)); /* subnormal range */
}

Test(tolerance, anything_further_is_not)
{
    cr_assert(!fa_testkit_faithful(FA_DTYPE_BF16, 2.640625, 2.67084)); /* two ulps below */
    cr_assert(!fa_testkit_faithful(FA_DTYPE_BF16, 2.6875, 2.67084));   /* two ulps above */
    cr_assert(!fa_testkit_faithful(FA_DTYPE_BF16, 2.65625, -2.67084)); /* wrong sign */
    /* a representable exact value admits only itself */
    cr_assert(fa_testkit_faithful(FA_DTYPE_F16, 2.0, 2.0));
    cr_assert(!fa_testkit_faithful(FA_DTYPE_F16, 2.0 + 0x1p-9, 2.0));
    cr_assert(!fa_testkit_faithful(FA_DTYPE_F16, 2.0 - 0x1p-10, 2.0));
    /* just above a power of two the neighbour below 2 is not a bracketing value */
    cr_assert(!fa_testkit_faithful(FA_DTYPE_F16, 2.0 - 0x1p-10, 2.0 + 0x1p-12));
    cr_assert(!fa_testkit_faithful(FA_DTYPE_F16, NAN, 1.0));
    cr_assert(!fa_testkit_faithful(FA_DTYPE_F16, INFINITY, 65504.0));
}
