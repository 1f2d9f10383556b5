/*
 * file_record — per-file states, named and rendered (see
 * src/core/file_record.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/digest.h"
#include "util/json_path.h"
#include "core/file_record.h"

static const char *const state_names[_FILE_RECORD_STATE_MAX] = {
        [FILE_RECORD_PENDING] = "pending",   [FILE_RECORD_APPLIED] = "applied",
        [FILE_RECORD_REJECTED] = "rejected", [FILE_RECORD_DUPLICATE] = "duplicate",
        [FILE_RECORD_IGNORED] = "ignored",   [FILE_RECORD_UNREADABLE] = "unreadable",
        [FILE_RECORD_GONE] = "gone",
};

const char *file_record_state_name(enum file_record_state s)
{
        return (unsigned)s < _FILE_RECORD_STATE_MAX ? state_names[s] : NULL;
}

static int json_str_or_null(struct buf *out, const char *s)
{
        return s ? buf_json_string(out, s, strlen(s)) : buf_puts(out, "null");
}

/* {"namespace":..,"name":..,"uid":..} of one pod. */
static int render_pod(const struct file_record_pod *p, struct buf *out)
{
        const char *slash = strchr(p->key, '/');
        const char *name = slash ? slash + 1 : p->key;
        size_t ns_len = slash ? (size_t)(slash - p->key) : 0;

        if (buf_puts(out, "{\"namespace\":") < 0 || buf_json_string(out, p->key, ns_len) < 0 ||
            buf_puts(out, ",\"name\":") < 0 || buf_json_string(out, name, strlen(name)) < 0 ||
            buf_puts(out, ",\"uid\":") < 0 || buf_json_string(out, p->uid, strlen(p->uid)) < 0 ||
            buf_putc(out, '}') < 0)
                return -ENOMEM;
        return 0;
}

int file_record_render(const struct file_record_view *v, struct buf *out)
{
        char digest[DIGEST_TEXT_MAX];
        const char *state = file_record_state_name(v->state);

        if (v->digest)
                digest_text(v->digest, digest);
        if (buf_puts(out, "{\"source\":") < 0 || json_str_or_null(out, v->source) < 0)
                return -ENOMEM;
        /* The manifest URL as logged; a file's path byte for byte. */
        if (strcmp(v->source, "http") == 0 ? buf_puts(out, ",\"url\":") < 0 || json_str_or_null(out, v->path) < 0
                                           : buf_putc(out, ',') < 0 || json_path_put(out, v->path) < 0)
                return -ENOMEM;
        if (buf_puts(out, ",\"state\":") < 0 || json_str_or_null(out, state ? state : "unknown") < 0 ||
            buf_puts(out, ",\"reason\":") < 0 || json_str_or_null(out, v->reason) < 0 ||
            buf_puts(out, ",\"digest\":") < 0 || json_str_or_null(out, v->digest ? digest : NULL) < 0)
                return -ENOMEM;
        if ((v->size >= 0 ? buf_printf(out, ",\"size\":%" PRId64, v->size) : buf_puts(out, ",\"size\":null")) < 0 ||
            buf_puts(out, ",\"mtime\":") < 0 || buf_json_time(out, v->mtime_usec) < 0 ||
            buf_puts(out, ",\"pods\":[") < 0)
                return -ENOMEM;
        for (size_t i = 0; i < v->n_pods; i++)
                if ((i > 0 && buf_putc(out, ',') < 0) || render_pod(&v->pods[i], out) < 0)
                        return -ENOMEM;
        if ((v->seq ? buf_printf(out, "],\"seq\":%" PRIu64 "}", v->seq) : buf_puts(out, "],\"seq\":null}")) < 0)
                return -ENOMEM;
        return 0;
}

char *file_record_reason_dup(const char *reason)
{
        static const char more[] = "...";
        size_t len = strlen(reason), keep = len, i = 0;
        char *out;

        if (len < FILE_RECORD_REASON_MAX)
                return strdup(reason);
        /* Whole characters only, so the text stays valid UTF-8. */
        keep = 0;
        while (i < len) {
                size_t n = (unsigned char)reason[i] < 0x80 ? 1 : utf8_len((const unsigned char *)reason + i, len - i);

                if (n == 0)
                        n = 1; /* a stray byte: the JSON writer replaces it */
                if (i + n > FILE_RECORD_REASON_MAX - sizeof(more))
                        break;
                i += n;
                keep = i;
        }
        out = malloc(keep + sizeof(more));
        if (!out)
                return NULL;
        memcpy(out, reason, keep);
        memcpy(out + keep, more, sizeof(more));
        return out;
}
