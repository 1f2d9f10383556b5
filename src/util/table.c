/*
 * table — columns fitted to a terminal's width (src/util/table.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util/table.h"

static const char *shown(const char *s)
{
        return s && *s ? s : "-";
}

static int max_int(int a, int b)
{
        return a > b ? a : b;
}

int table_text_width(const char *s)
{
        int n = 0;

        for (; *s; s++)
                if (((unsigned char)*s & 0xc0) != 0x80)
                        n++;
        return n;
}

/* Writes the characters of s numbered from (0 the first) up to before to;
 * a control character as '?'. */
static void put_chars(const char *s, int from, int to, FILE *f)
{
        int i = -1;

        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;

                if ((c & 0xc0) != 0x80)
                        i++;
                if (i >= to)
                        break;
                if (i >= from)
                        putc(c < 0x20 || c == 0x7f ? '?' : c, f);
        }
}

/* s in width columns: whole, or elided when longer, in its middle or
 * (tail) at its start; cut when width has no room for the ellipsis and a
 * character each side.  Padded to width when pad.  Returns the columns
 * written. */
static int put_cell(const struct table *t, const char *s, int width, bool tail, bool pad, FILE *f)
{
        int n = table_text_width(s);

        if (n <= width) {
                put_chars(s, 0, n, f);
        } else if (width >= t->ellipsis_width + 2) {
                int keep = width - t->ellipsis_width, head = tail ? 0 : (keep + 1) / 2;

                put_chars(s, 0, head, f);
                fputs(t->ellipsis, f);
                put_chars(s, n - (keep - head), n, f);
                n = width;
        } else {
                n = max_int(width, 0);
                put_chars(s, 0, n, f);
        }
        for (; pad && n < width; n++)
                putc(' ', f);
        return n;
}

void table_init(struct table *t, const struct table_column *col, size_t n, int line, bool utf8)
{
        memset(t, 0, sizeof(*t));
        t->col = col;
        t->n = n < TABLE_MAX_COLUMNS ? n : TABLE_MAX_COLUMNS;
        t->line = line;
        t->ellipsis = utf8 ? "\xe2\x80\xa6" : "...";
        t->ellipsis_width = utf8 ? 1 : 3;
}

void table_measure(struct table *t, const char *const *cells)
{
        if (t->laid_out)
                return;
        for (size_t i = 0; i < t->n; i++)
                t->width[i] = max_int(t->width[i], table_text_width(shown(cells[i])));
}

/* The column to take one from: the widest that may still be cut (the
 * later of two as wide), of those cut first while one of them may be;
 * t->n when none may. */
static size_t widest_cuttable(const struct table *t)
{
        size_t w = t->n;

        for (size_t i = 0; i < t->n; i++) {
                if (t->col[i].least == 0 || t->width[i] <= t->col[i].least)
                        continue;
                if (w == t->n || (t->col[i].first && !t->col[w].first) ||
                    (t->col[i].first == t->col[w].first && t->width[i] >= t->width[w]))
                        w = i;
        }
        return w;
}

void table_layout(struct table *t)
{
        int total = TABLE_GAP * (int)(t->n ? t->n - 1 : 0);
        size_t i;

        if (t->laid_out)
                return;
        for (i = 0; i < t->n; i++) {
                t->width[i] = max_int(t->width[i], max_int(t->col[i].floor, table_text_width(t->col[i].title)));
                total += t->width[i];
        }
        while (total > t->line && (i = widest_cuttable(t)) < t->n) {
                t->width[i]--;
                total--;
        }
        for (i = t->n; i-- > 0 && total < t->line;) {
                int add = t->col[i].most - t->width[i];

                if (add > t->line - total)
                        add = t->line - total;
                if (add > 0) {
                        t->width[i] += add;
                        total += add;
                }
        }
        t->laid_out = true;
}

void table_print_row(const struct table *t, const char *const *cells, FILE *f)
{
        int pos = 0, at = 0; /* where this row is, where the layout is */

        for (size_t i = 0; i < t->n; i++) {
                const char *s = shown(cells[i]);
                int width = t->width[i];

                if (i + 1 == t->n) { /* the rest of the line, its own width at least */
                        put_cell(t, s, max_int(t->line - pos, width), t->col[i].tail, false, f);
                        break;
                }
                if (t->col[i].least == 0)
                        width = max_int(width, table_text_width(s)); /* never cut */
                else
                        width = max_int(width - (pos - at), 0); /* catch up with the layout */
                pos += put_cell(t, s, width, t->col[i].tail, true, f) + TABLE_GAP;
                at += t->width[i] + TABLE_GAP;
                fprintf(f, "%*s", TABLE_GAP, "");
        }
        putc('\n', f);
}

void table_print_header(const struct table *t, FILE *f)
{
        const char *titles[TABLE_MAX_COLUMNS];

        for (size_t i = 0; i < t->n; i++)
                titles[i] = t->col[i].title;
        table_print_row(t, titles, f);
}

void table_print_note(const struct table *t, const char *prefix, const char *text, FILE *f)
{
        int used = put_cell(t, prefix, table_text_width(prefix), false, false, f);

        put_cell(t, text, max_int(t->line - used, 1), false, false, f);
        putc('\n', f);
}

int table_terminal_width(int fd)
{
        struct winsize ws;
        const char *env = getenv("COLUMNS");

        if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                return ws.ws_col;
        if (env && *env >= '0' && *env <= '9') {
                char *end = NULL;
                long v;

                errno = 0;
                v = strtol(env, &end, 10);
                if (errno == 0 && *end == '\0' && v > 0 && v <= 65535)
                        return (int)v;
        }
        return TABLE_DEFAULT_WIDTH;
}
