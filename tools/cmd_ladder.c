/* cmd_ladder.c - placeholder until this subcommand lands. */
#include "cli.h"

int cmd_ladder(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("ladder: not implemented yet");
}
