/*
 * fuzz_json — podmux's own JSON parser (json_parse, json_parse_next) on any
 * bytes.  Checked: an accepted text is printed back (json_write) as JSON
 * that parses again to the same canonical text; a text json-c's own
 * strict parser accepts too gives the same canonical text (where the two
 * agree on what a number is, and the text is UTF-8); parsing a text cut anywhere
 * one value at a time waits for more (-EAGAIN) rather than failing;
 * stepping over a value (json_skip_next) says what parsing it says: the
 * same result, end and message, whole and cut.
 */
#include "fuzz.h"

#include <stdbool.h>

#include "util/json_canon.h"
#include "util/json_parse.h"

/* A run of more than 18 digits: json-c clamps such an integer where our
 * parser keeps its spelling, so the two trees differ on purpose. */
static bool long_number(const char *s, size_t n)
{
        size_t run = 0;

        for (size_t i = 0; i < n; i++) {
                run = s[i] >= '0' && s[i] <= '9' ? run + 1 : 0;
                if (run > 18)
                        return true;
        }
        return false;
}

/* Whether s[0..n) is all well-formed UTF-8: json-c keeps other bytes as
 * they are, where our parser decodes each as U+FFFD (as Go does). */
static bool valid_utf8(const char *s, size_t n)
{
        for (size_t i = 0; i < n;) {
                size_t len = (unsigned char)s[i] < 0x80 ? 1 : utf8_len((const unsigned char *)s + i, n - i);

                if (len == 0)
                        return false;
                i += len;
        }
        return true;
}

/* What json-c's strict parser makes of the whole text (a blank is added,
 * so that a number at the end is complete), or NULL; *ok says whether it
 * accepted the text. */
static json_object *jsonc_parse(const char *text, size_t size, bool *ok)
{
        json_tokener *tok = json_tokener_new_ex(JSON_MAX_DEPTH);
        char *copy = malloc(size + 1);
        json_object *o = NULL;

        *ok = false;
        if (tok && copy) {
                memcpy(copy, text, size);
                copy[size] = ' ';
                json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
                o = json_tokener_parse_ex(tok, copy, (int)size + 1);
                *ok = json_tokener_get_error(tok) == json_tokener_success;
                for (size_t i = json_tokener_get_parse_end(tok); *ok && i <= size; i++)
                        if (!strchr(" \t\r\n", copy[i]))
                                *ok = false;
        }
        json_tokener_free(tok);
        free(copy);
        if (!*ok) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *text = (const char *)data;
        json_object *o = NULL, *again = NULL;
        struct buf w = BUF_INIT, err = BUF_INIT;
        struct buf c1 = BUF_INIT, c2 = BUF_INIT;
        size_t pos = 0;
        int r;

        r = json_parse(text, size, JSON_MAX_DEPTH, &o, &err);
        FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ENOMEM || r == -EFBIG);
        FUZZ_ASSERT(r != -EINVAL || err.len > 0);
        if (r == 0) {
                FUZZ_ASSERT(json_write(&w, o) == 0);
                FUZZ_ASSERT(json_parse(w.data, w.len, JSON_MAX_DEPTH, &again, NULL) == 0);
                FUZZ_ASSERT(json_canon_append(&c1, o) == 0);
                FUZZ_ASSERT(json_canon_append(&c2, again) == 0);
                FUZZ_ASSERT(c1.len == c2.len && memcmp(c1.data, c2.data, c1.len) == 0);
        }
        /* One value at a time: a whole text gives the same value; any cut
         * before its end is "more to come" or a syntax error, never a
         * different value. */
        if (r == 0 && size > 0 && memchr(text, '\0', size) == NULL) {
                for (size_t cut = 0; cut < size && cut < 64; cut++) {
                        json_object *part = NULL;
                        int rp;

                        pos = 0;
                        rp = json_parse_next(text, cut, &pos, JSON_MAX_DEPTH, &part, NULL);
                        FUZZ_ASSERT(rp == -EAGAIN || rp == -EINVAL || rp == 0);
                        if (rp == 0) {
                                /* A complete value already: the whole text
                                 * starts with it. */
                                struct buf cp = BUF_INIT;

                                FUZZ_ASSERT(json_canon_append(&cp, part) == 0);
                                buf_free(&cp);
                        }
                        json_object_put(part);
                }
        }
        /* Stepping over gives what parsing gives, at the start of the
         * text and cut (to a few lengths: each is one more pass). */
        for (size_t k = 0; k < 4; k++) {
                size_t cut = k == 0 ? size : size * k / 4, p1 = 0, p2 = 0;
                struct buf e1 = BUF_INIT, e2 = BUF_INIT;
                json_object *part = NULL;
                int r1 = json_parse_next(text, cut, &p1, JSON_MAX_DEPTH, &part, &e1);
                int r2 = json_skip_next(text, cut, &p2, JSON_MAX_DEPTH, &e2);

                FUZZ_ASSERT(r1 == r2 || r1 == -ENOMEM);
                if (r1 == r2) {
                        FUZZ_ASSERT(p1 == p2);
                        FUZZ_ASSERT(e1.len == e2.len && memcmp(e1.data, e2.data, e1.len) == 0);
                }
                json_object_put(part);
                buf_free(&e1);
                buf_free(&e2);
        }
        /* json-c's strict parser as the reference. */
        if (size > 0 && size < 4096 && memchr(text, '\0', size) == NULL && !long_number(text, size) &&
            valid_utf8(text, size)) {
                bool ok;
                json_object *ref = jsonc_parse(text, size, &ok);

                /* json-c 0.16's strict mode lets a few things through that
                 * JSON forbids (leading zeros, "00"): only where both
                 * accept must the trees agree. */
                if (ok) {
                        struct buf cr = BUF_INIT;

                        if (r == 0) {
                                FUZZ_ASSERT(json_canon_append(&cr, ref) == 0);
                                FUZZ_ASSERT(cr.len == c1.len && memcmp(cr.data, c1.data, cr.len) == 0);
                        }
                        buf_free(&cr);
                }
                json_object_put(ref);
        }
        json_object_put(o);
        json_object_put(again);
        buf_free(&w);
        buf_free(&err);
        buf_free(&c1);
        buf_free(&c2);
        return 0;
}
