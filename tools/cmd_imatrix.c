/* cmd_imatrix.c - placeholder until this subcommand lands. */
#include "cli.h"

int cmd_imatrix(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("imatrix: not implemented yet");
}
