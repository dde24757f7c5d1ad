/* cmd_quantize.c - placeholder until this subcommand lands. */
#include "cli.h"

int cmd_quantize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("quantize: not implemented yet");
}
