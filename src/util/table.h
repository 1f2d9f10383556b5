/*
 * table — rows of text in columns that fit a terminal's width, the way
 * `kubectl get -w` prints: columns as wide as the first rows need, laid
 * out once so that every later row lines up under them; the widest
 * columns that may be cut are cut first, a cut value elided in its middle
 * ("nginx-w…-node1"), so its start and its end both show, or at its start
 * ("…7551809").
 *
 * Owns: nothing (the columns and cells are the caller's).  Never:
 * allocates, or writes anywhere but to the FILE it is given.
 */
#ifndef PODMUX_TABLE_H
#define PODMUX_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define TABLE_MAX_COLUMNS 8
#define TABLE_GAP 2            /* spaces between two columns */
#define TABLE_DEFAULT_WIDTH 80 /* no terminal and no $COLUMNS */

struct table_column {
        const char *title;
        int floor; /* laid out at least this wide (and as wide as the title) */
        int least; /* cut down to this at most when the line is short; 0: never
                    * cut (a longer value is printed whole, and the next
                    * column that may be cut gives up the room) */
        int most;  /* spare room widens it up to this; 0: not widened */
        bool tail; /* cut from the start, the end kept (a counter's last
                    * digits); else in the middle */
        bool first; /* cut down to its least before any column without it */
};

struct table {
        const struct table_column *col; /* n of them; the last one takes the
                                         * rest of the line and is not padded */
        size_t n;
        int line; /* the width every line must fit */
        int width[TABLE_MAX_COLUMNS];
        bool laid_out;
        const char *ellipsis; /* "…" in a UTF-8 locale, else "..." */
        int ellipsis_width;
};

/* A table of n columns (n <= TABLE_MAX_COLUMNS, col kept by reference)
 * for lines of line columns; utf8: the terminal shows UTF-8. */
void table_init(struct table *t, const struct table_column *col, size_t n, int line, bool utf8);
/* Before table_layout(): widens the columns to fit one row's cells (n of
 * them; NULL or "" is shown as "-"). */
void table_measure(struct table *t, const char *const *cells);
/* Fixes the widths once: each column as wide as measured (its floor at
 * least); while the line is too long, the widest column that may be cut
 * (of those cut first, while one of them may be) loses one; spare room widens the columns that take it, last first. */
void table_layout(struct table *t);
void table_print_header(const struct table *t, FILE *f);
/* One row: each cell padded or elided to its column (control characters
 * shown as '?', so a value cannot drive the terminal), the last one to
 * what is left of the line (its own width at least, when the line is
 * too short for every column at its least).  A value too long for a column never cut
 * takes its room from the next column that may be: the later columns stay
 * in line, and the row within the line when the last column can give way. */
void table_print_row(const struct table *t, const char *const *cells, FILE *f);
/* prefix then text on one line, text elided to fit. */
void table_print_note(const struct table *t, const char *prefix, const char *text, FILE *f);

/* Columns s takes: one per UTF-8 character (a wide character counts one). */
int table_text_width(const char *s);
/* The width to fit: the terminal's (TIOCGWINSZ) when fd is one, else
 * $COLUMNS when it is a positive number, else TABLE_DEFAULT_WIDTH. */
int table_terminal_width(int fd);

#endif
