/*
 * files_msg — the per-file members of the stream's messages (see
 * src/stream/files_msg.h and doc/protocol.md "Files request").
 */
#include <errno.h>
#include <string.h>

#include "stream/files_msg.h"
#include "util/json_path.h"

int files_msg_record(const struct file_record_view *v, struct buf *out)
{
        if (buf_puts(out, ",\"file\":") < 0 || file_record_render(v, out) < 0)
                return -ENOMEM;
        return 0;
}

int files_msg_head(const char *path, char *const *patterns, size_t n_patterns, const char *url, struct buf *out)
{
        if (buf_putc(out, ',') < 0 || json_path_put(out, path) < 0 || buf_puts(out, ",\"patterns\":[") < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n_patterns; i++)
                if ((i && buf_putc(out, ',') < 0) || buf_json_string(out, patterns[i], strlen(patterns[i])) < 0)
                        return -ENOMEM;
        if (buf_puts(out, "],\"url\":") < 0 ||
            (url ? buf_json_string(out, url, strlen(url)) : buf_puts(out, "null")) < 0)
                return -ENOMEM;
        return 0;
}

struct files_status {
        struct buf *out;
        size_t counts[_FILE_RECORD_STATE_MAX];
        size_t shown, total, max;
        int pass; /* 0: counting, 1: not applied, 2: applied */
};

static int status_record(void *data, const struct file_record_view *v)
{
        struct files_status *fs = data;

        if (fs->pass == 0) {
                if ((unsigned)v->state < _FILE_RECORD_STATE_MAX)
                        fs->counts[v->state]++;
                fs->total++;
                return 0;
        }
        if ((v->state == FILE_RECORD_APPLIED) != (fs->pass == 2) || fs->shown == fs->max)
                return 0;
        if ((fs->shown && buf_putc(fs->out, ',') < 0) || file_record_render(v, fs->out) < 0)
                return -ENOMEM;
        fs->shown++;
        return 0;
}

int files_msg_status(files_msg_each_fn each, void *data, size_t max, struct buf *out)
{
        struct files_status fs = {.out = out, .max = max};
        int r = 0;

        for (fs.pass = 0; fs.pass < 3 && r >= 0; fs.pass++) {
                if (fs.pass == 1) {
                        r = buf_printf(out, ",\"files\":{\"total\":%zu,\"states\":{", fs.total);
                        for (int s = 0; s < _FILE_RECORD_STATE_MAX && r >= 0; s++)
                                if (s != FILE_RECORD_GONE)
                                        r = buf_printf(out, "%s\"%s\":%zu", s ? "," : "",
                                                       file_record_state_name((enum file_record_state)s), fs.counts[s]);
                        if (r >= 0)
                                r = buf_puts(out, "},\"records\":[");
                }
                if (r >= 0)
                        r = each(data, status_record, &fs);
        }
        if (r >= 0)
                r = buf_printf(out, "],\"omitted\":%zu}", fs.total - fs.shown);
        return r < 0 ? -ENOMEM : 0;
}
