/*
 * usage — how every subcommand of the podmux binary reports a usage error.
 *
 * Owns: nothing; writes to standard error only.
 * Never: exits; the caller returns the status it is given.
 * Below main.c and every subcommand, so none of them calls back into
 * main.c (main.c only dispatches).
 */
#ifndef PODMUX_CMD_USAGE_H
#define PODMUX_CMD_USAGE_H

struct option;

/* A usage error, the same for every subcommand: prints "podmux CMD: MSG"
 * and "Try 'podmux CMD --help' for more information." on standard error
 * (cmd NULL: "podmux" alone) and returns the exit status, 2. */
int cmd_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cmd_usage_error() for a flag getopt_long() refused (c '?' or ':'; opts
 * its long flags): the message of options_bad_flag() (cmd/options.h). */
int cmd_bad_flag(const char *cmd, int c, int argc, char *const *argv, const struct option *opts);

#endif
