/*
 * cmd — the subcommands of the podmux binary.  Each parses its own argv
 * (argv[0] is the subcommand name) and returns the process exit status.
 */
#ifndef PODMUX_CMD_H
#define PODMUX_CMD_H

int cmd_run(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_wait(int argc, char **argv);

/* A usage error, the same for every subcommand: prints "podmux CMD: MSG"
 * and "Try 'podmux CMD --help' for more information." on standard error
 * (cmd NULL: "podmux" alone) and returns the exit status, 2. */
int cmd_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct option;
/* cmd_usage_error() for a flag getopt_long() refused (c '?' or ':'; opts
 * its long flags): the message of options_bad_flag() (cmd/options.h). */
int cmd_bad_flag(const char *cmd, int c, int argc, char *const *argv, const struct option *opts);

#endif
