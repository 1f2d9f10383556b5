/* usage — the one way a subcommand reports a usage error (usage.h). */
#include <stdarg.h>
#include <stdio.h>

#include "util/buf.h"
#include "util/log.h"
#include "cmd/options.h"
#include "cmd/usage.h"

int cmd_usage_error(const char *cmd, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "podmux%s%s: ", cmd ? " " : "", cmd ? cmd : "");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry 'podmux%s%s --help' for more information.\n", cmd ? " " : "", cmd ? cmd : "");
        return 2;
}

int cmd_bad_flag(const char *cmd, int c, int argc, char *const *argv, const struct option *opts)
{
        struct buf err = BUF_INIT;
        int r = options_bad_flag(c, argc, argv, opts, &err);

        r = cmd_usage_error(cmd, "%s", err.len ? err.data : ERRNO_STR(r));
        buf_free(&err);
        return r;
}
