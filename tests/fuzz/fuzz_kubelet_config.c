/*
 * fuzz_kubelet_config — a KubeletConfiguration file given to
 * `podmux run --config` (options_parse: the file read as YAML, kind
 * checked, the static-pod fields taken: paths, URL, durations and the URL
 * headers).  Checked: a failure has a message naming --config; a success
 * has positive check periods and complete headers.
 */
#include "fuzz.h"

#include "util/buf.h"
#include "cmd/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct options o;
        struct buf err = BUF_INIT;
        char path[64];
        char *argv[] = {(char *)"run", (char *)"--config", path, (char *)"--node-name", (char *)"fuzz",
                        NULL};
        int fd, r;

        fd = fuzz_memfile(data, size, path, sizeof(path));
        r = options_parse(5, argv, &o, &err);
        if (r == 0) {
                FUZZ_ASSERT(o.file_check_usec > 0 && o.http_check_usec > 0);
                for (size_t i = 0; i < o.n_headers; i++)
                        FUZZ_ASSERT(o.headers[i].name && o.headers[i].value);
                options_free(&o);
        } else {
                FUZZ_ASSERT(r == -ENOMEM || (err.len > 0 && strstr(err.data, "--config")));
        }
        close(fd);
        buf_free(&err);
        return 0;
}
