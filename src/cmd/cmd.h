/*
 * cmd — the subcommands of the podmux binary.  Each parses its own argv
 * (argv[0] is the subcommand name) and returns the process exit status;
 * a usage error is reported through cmd/usage.h.
 */
#ifndef PODMUX_CMD_H
#define PODMUX_CMD_H

int cmd_run(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_wait(int argc, char **argv);

#endif
