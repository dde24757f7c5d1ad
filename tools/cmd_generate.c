/* cmd_generate.c - placeholder until this subcommand lands. */
#include "cli.h"

int cmd_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("generate: not implemented yet");
}
