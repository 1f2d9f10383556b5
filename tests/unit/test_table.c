/* Unit tests: columns fitted to a terminal's width (util/table). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ptsname_r() */
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util/table.h"
#include "unit.h"

/* The columns of podmux watch -o wide (src/cmd/watch.c), with UID cut
 * like the others (test_cut_first has watch's). */
static const struct table_column cols[] = {
        {"SEQ", 16, 7, 0, true, false},        {"OP", 9, 0, 0, false, false},      {"SOURCE", 6, 0, 0, false, false},
        {"NAMESPACE", 9, 9, 63, false, false}, {"NAME", 10, 16, 63, false, false}, {"UID", 8, 8, 36, false, false},
        {"PHASE", 9, 0, 0, false, false},
};
#define N (sizeof(cols) / sizeof(cols[0]))

static const char *const long_row[N] = {
        "17",
        "ADD",
        "file",
        "kube-system",
        "a-very-long-static-pod-name-that-goes-on-and-on-node1",
        "0123456789abcdef0123456789abcdef",
        "Running",
};
static const char *const short_row[N] = {
        "1795759517551809", "REMOVE", "file", "default", "web-node1", "fedcba9876543210fedcba9876543210", "Pending"};

/* What f printed: a string to free. */
struct out {
        char *text;
        size_t len;
        FILE *f;
};

static void out_open(struct out *o)
{
        memset(o, 0, sizeof(*o));
        o->f = open_memstream(&o->text, &o->len);
        ck_assert_ptr_nonnull(o->f);
}

static char *out_close(struct out *o)
{
        ck_assert_int_eq(fclose(o->f), 0);
        return o->text;
}

/* Line i (0 the first) of text, without its newline, into buf. */
static const char *line_of(const char *text, int i, char *buf, size_t size)
{
        for (; i > 0 && text; i--) {
                text = strchr(text, '\n');
                text = text ? text + 1 : NULL;
        }
        ck_assert_ptr_nonnull(text);
        size_t n = strcspn(text, "\n");
        ck_assert_uint_lt(n, size);
        memcpy(buf, text, n);
        buf[n] = '\0';
        return buf;
}

/* The character position (not byte) where the k-th cell of a row starts:
 * cells are separated by two spaces or more. */
static int cell_start(const char *line, int k)
{
        int pos = 0, cell = 0;
        bool in_cell = false;
        int spaces = 2;

        for (const char *p = line; *p; p++) {
                if (((unsigned char)*p & 0xc0) == 0x80)
                        continue;
                if (*p == ' ') {
                        spaces++;
                } else {
                        if (!in_cell || spaces >= 2) {
                                if (cell == k)
                                        return pos;
                                cell++;
                        }
                        in_cell = true;
                        spaces = 0;
                }
                pos++;
        }
        return -1;
}

static void lay_out(struct table *t, int width, bool utf8, const char *const *const *rows, size_t n)
{
        table_init(t, cols, N, width, utf8);
        for (size_t i = 0; i < n; i++)
                table_measure(t, rows[i]);
        table_layout(t);
}

/* At 80 columns, with a name of 53 characters and a UID of 32: every
 * line fits, every cell starts under its title, the long values are
 * elided in their middle (start and end shown). */
START_TEST(test_fits_80_and_aligns)
{
        const char *const *rows[] = {long_row, short_row};
        struct table t;
        struct out o;
        char buf[512];
        char *text;

        for (int utf8 = 0; utf8 <= 1; utf8++) {
                lay_out(&t, 80, utf8, rows, 2);
                out_open(&o);
                table_print_header(&t, o.f);
                table_print_row(&t, long_row, o.f);
                table_print_row(&t, short_row, o.f);
                text = out_close(&o);
                for (int i = 0; i < 3; i++) {
                        const char *l = line_of(text, i, buf, sizeof(buf));

                        ck_assert_msg(table_text_width(l) <= 80, "line %d is %d wide: %s", i, table_text_width(l), l);
                        for (int k = 0; k < (int)N; k++)
                                ck_assert_msg(cell_start(l, k) == cell_start(line_of(text, 0, buf + 256, 256), k),
                                              "line %d cell %d at %d: %s", i, k, cell_start(l, k), l);
                }
                line_of(text, 1, buf, sizeof(buf));
                ck_assert_msg(strstr(buf, "a-very") && strstr(buf, "-node1") &&
                                      strstr(buf, utf8 ? "\xe2\x80\xa6" : "..."),
                              "long name not elided in its middle: %s", buf);
                ck_assert_msg(strstr(buf, "012") && strstr(buf, "def  "), "UID: %s", buf);
                ck_assert_msg(strstr(buf, "kub") && strstr(buf, "Running"), "%s", buf);
                line_of(text, 2, buf, sizeof(buf));
                ck_assert_msg(strstr(buf, "web-node1") && strstr(buf, "REMOVE"), "short row cut: %s", buf);
                /* SEQ keeps its last digits. */
                ck_assert_msg(strncmp(buf, t.ellipsis, strlen(t.ellipsis)) == 0 && strstr(buf, "551809  ") &&
                                      !strstr(buf, "1795759517551809"),
                              "%s", buf);
                free(text);
        }
}
END_TEST

/* The widest cuttable column goes first; spare room widens UID, then
 * NAME, then NAMESPACE; a wide line leaves every value whole. */
START_TEST(test_layout_widths)
{
        const char *const *rows[] = {long_row};
        struct table t;
        int total;

        lay_out(&t, 80, true, rows, 1);
        total = TABLE_GAP * (int)(N - 1);
        for (size_t i = 0; i < N; i++)
                total += t.width[i];
        ck_assert_int_eq(total, 80);
        ck_assert_int_eq(t.width[1], 9);
        ck_assert_int_eq(t.width[2], 6);
        ck_assert_int_eq(t.width[4], 16); /* NAME cut to its least; */
        ck_assert_int_ge(t.width[3], 9);  /* the others, as wide, cut alike */
        ck_assert_int_ge(t.width[0], 7);
        ck_assert_int_ge(t.width[5], 8);
        ck_assert_int_le(abs(t.width[0] - t.width[5]), 1);
        ck_assert_int_le(abs(t.width[3] - t.width[5]), 1);

        lay_out(&t, 200, true, rows, 1);
        ck_assert_int_eq(t.width[5], 36);
        ck_assert_int_eq(t.width[4], 63);
        ck_assert_int_ge(t.width[3], 11);

        /* Too narrow for the minimums: each cuttable column at its least. */
        lay_out(&t, 20, true, rows, 1);
        ck_assert_int_eq(t.width[0], 7);
        ck_assert_int_eq(t.width[3], 9);
        ck_assert_int_eq(t.width[4], 16);
        ck_assert_int_eq(t.width[5], 8);
        {
                struct out o;
                char *text;

                out_open(&o);
                table_print_row(&t, long_row, o.f);
                text = out_close(&o);
                ck_assert_msg(strstr(text, "  Running\n"), "the last column lost: %s", text);
                free(text);
        }
        /* Laid out once: later measures change nothing. */
        table_measure(&t, long_row);
        ck_assert_int_eq(t.width[4], 16);
}
END_TEST

/* A value of a column never cut is printed whole, and the next column
 * that may be cut gives up the room: the row keeps in line and within the
 * line.  The last column takes the rest of the line and is cut to it;
 * control characters become '?'; an empty cell is "-"; a note is cut to
 * the line. */
START_TEST(test_cells)
{
        const char *const *rows[] = {short_row};
        const char *const wide[N] = {"123456789012",
                                     "DEREGISTERED",
                                     "plugin",
                                     "CSIPlugin",
                                     "csi.example.com",
                                     NULL,
                                     "a reason that is much longer than the rest of the line could ever hold"};
        const char *const ctl[N] = {"1", "ADD", "file", "default", "ev\x1b[2Jil", "", "Pending"};
        struct table t;
        struct out o;
        char buf[512];
        char *text;

        lay_out(&t, 80, false, rows, 1);
        out_open(&o);
        table_print_row(&t, wide, o.f);
        table_print_row(&t, ctl, o.f);
        table_print_note(&t, "-- ",
                         "sources ready: file, http, api, and a great many words after them to fill "
                         "the line and more",
                         o.f);
        text = out_close(&o);
        line_of(text, 0, buf, sizeof(buf));
        ck_assert_msg(strncmp(buf, "123456789012", 12) == 0 && strstr(buf, "  DEREGISTERED  plugin  CS...n  csi"), "%s",
                      buf);
        ck_assert_int_eq(table_text_width(buf), 80);
        /* NAMESPACE gave up 3 columns to OP: NAME is where the header has it. */
        ck_assert_int_eq(strstr(buf, "csi") - buf, t.width[0] + t.width[1] + t.width[2] + t.width[3] + 4 * TABLE_GAP);
        ck_assert_msg(strstr(buf, "a r") && strstr(buf, "...old"), "%s", buf);
        line_of(text, 1, buf, sizeof(buf));
        ck_assert_msg(strstr(buf, "ev?[2Jil") && !strchr(buf, '\x1b'), "%s", buf);
        ck_assert_int_eq(cell_start(buf, 5),
                         t.width[0] + t.width[1] + t.width[2] + t.width[3] + t.width[4] + 5 * TABLE_GAP);
        ck_assert_msg(buf[cell_start(buf, 5)] == '-', "%s", buf);
        line_of(text, 2, buf, sizeof(buf));
        ck_assert_int_eq(table_text_width(buf), 80);
        ck_assert_msg(strncmp(buf, "-- sources ready", 16) == 0 && strstr(buf, "..."), "%s", buf);
        free(text);
}
END_TEST

/* UTF-8: a character is one column, never split. */
START_TEST(test_utf8_width)
{
        static const struct table_column one[] = {{"A", 4, 4, 0, false, false}, {"B", 1, 0, 0, false, false}};
        const char *const row[2] = {"\xc3\xa9t\xc3\xa9-\xc3\xa9t\xc3\xa9", "x"}; /* été-été */
        struct table t;
        struct out o;
        char *text;

        ck_assert_int_eq(table_text_width(row[0]), 7);
        table_init(&t, one, 2, 7, true);
        table_measure(&t, row);
        table_layout(&t);
        ck_assert_int_eq(t.width[0], 4);
        out_open(&o);
        table_print_row(&t, row, o.f);
        text = out_close(&o);
        ck_assert_str_eq(text, "\xc3\xa9t\xe2\x80\xa6\xc3\xa9  x\n"); /* ét…é */
        free(text);
}
END_TEST

/* The width: a terminal's, else $COLUMNS (a positive number), else 80. */
START_TEST(test_terminal_width)
{
        struct winsize ws = {.ws_row = 24, .ws_col = 61};
        char name[64];
        int pipefd[2], master, slave;

        ck_assert_int_eq(pipe(pipefd), 0);
        unsetenv("COLUMNS");
        ck_assert_int_eq(table_terminal_width(pipefd[1]), TABLE_DEFAULT_WIDTH);
        setenv("COLUMNS", "132", 1);
        ck_assert_int_eq(table_terminal_width(pipefd[1]), 132);
        for (const char *const *bad = (const char *const[]){"0", "-5", "abc", "80x", "", "99999999999", NULL}; *bad;
             bad++) {
                setenv("COLUMNS", *bad, 1);
                ck_assert_msg(table_terminal_width(pipefd[1]) == TABLE_DEFAULT_WIDTH, "COLUMNS=%s", *bad);
        }
        master = posix_openpt(O_RDWR | O_NOCTTY);
        ck_assert_int_ge(master, 0);
        ck_assert_int_eq(grantpt(master), 0);
        ck_assert_int_eq(unlockpt(master), 0);
        ck_assert_int_eq(ptsname_r(master, name, sizeof(name)), 0);
        slave = open(name, O_RDWR | O_NOCTTY);
        ck_assert_int_ge(slave, 0);
        ck_assert_int_eq(ioctl(slave, TIOCSWINSZ, &ws), 0);
        setenv("COLUMNS", "132", 1);
        ck_assert_int_eq(table_terminal_width(slave), 61); /* the terminal wins */
        ws.ws_col = 0;                                     /* a terminal that does not know */
        ck_assert_int_eq(ioctl(slave, TIOCSWINSZ, &ws), 0);
        ck_assert_int_eq(table_terminal_width(slave), 132);
        unsetenv("COLUMNS");
        close(slave);
        close(master);
        close(pipefd[0]);
        close(pipefd[1]);
}
END_TEST

/* A column cut first (watch's UID) gives up its room down to its least
 * before any other is cut: at 80 columns the default table of podmux
 * watch shows a namespace and a name of 17 characters whole. */
START_TEST(test_cut_first)
{
        static const struct table_column watch[] = {
                {"OP", 9, 0, 0, false, false},         {"SOURCE", 6, 0, 0, false, false},
                {"NAMESPACE", 9, 9, 63, false, false}, {"NAME", 10, 16, 63, false, false},
                {"UID", 8, 8, 36, false, true},        {"PHASE", 9, 0, 0, false, false},
        };
        const char *const row[6] = {
                "ADD", "api", "kube-system", "kube-apiserver-vm", "0123456789abcdef0123456789abcdef", "Running"};
        const char *const longer[6] = {"ADD",
                                       "file",
                                       "kube-system-and-more",
                                       "a-very-long-static-pod-name-that-goes-on-and-on-node1",
                                       "0123456789abcdef0123456789abcdef",
                                       "Running"};
        struct table t;
        struct out o;
        char *text;

        table_init(&t, watch, 6, 80, true);
        table_measure(&t, row);
        table_layout(&t);
        out_open(&o);
        table_print_row(&t, row, o.f);
        text = out_close(&o);
        ck_assert_msg(strstr(text, "  kube-system  kube-apiserver-vm  "), "%s", text);
        free(text);

        /* Both cut first too long: UID at its least, then the widest. */
        table_init(&t, watch, 6, 80, true);
        table_measure(&t, longer);
        table_layout(&t);
        ck_assert_int_eq(t.width[4], 8);
        ck_assert_int_le(abs(t.width[2] - t.width[3]), 1);
        ck_assert_int_ge(t.width[3], 16);
}
END_TEST

UNIT_MAIN(test_fits_80_and_aligns, test_layout_widths, test_cells, test_utf8_width, test_terminal_width, test_cut_first)
