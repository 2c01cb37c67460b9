/* `flashattn conformance`: every backend against the float64 reference on generated cases.
 * The runner lives in the test kit (fa_conformance_main), so tests can call it too. */
#include "cli.h"
#include "fa_testkit.h"

int fa_cmd_conformance(int argc, char **argv)
{
    return fa_conformance_main(argc, argv);
}
