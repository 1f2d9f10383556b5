/*
 * stream_request — the client's first line (see
 * src/stream/stream_request.h).
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "util/json_parse.h"
#include "stream/stream_request.h"

int stream_request_parse(const char *line, size_t len, struct stream_request *ret_req,
                         const char **ret_why)
{
        struct stream_request req = {0};
        json_object *obj = NULL, *v = NULL;
        const char *why = NULL;
        size_t end = 0;
        int r = -EINVAL;

        if (len > INT32_MAX) {
                *ret_why = "the first line is too long";
                return -EINVAL;
        }
        r = json_parse_next(line, len, &end, STREAM_REQUEST_MAX_DEPTH, &obj, NULL);
        if (r == -ENOMEM)
                return r;
        r = -EINVAL;
        if (!obj || end == 0) {
                why = "the first line is not JSON";
                goto done;
        }
        /* One JSON text and nothing after it but blanks.  Bytes after
         * a NUL cannot belong to the text: they are extra data; any other
         * junk makes the line no JSON. */
        for (size_t i = end; i < len; i++) {
                if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
                        why = line[i] == '\0' ? "the first line has text after the JSON object"
                                              : "the first line is not JSON";
                        goto done;
                }
        }
        if (!json_object_is_type(obj, json_type_object)) {
                why = "the first line is not a JSON object";
                goto done;
        }
        if (json_object_object_get_ex(obj, "resume_after", &v)) {
                /* json-c keeps integers above INT64_MAX as uint64; below
                 * zero get_int64 is negative. */
                if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0) {
                        why = "resume_after must be a non-negative integer";
                        goto done;
                }
                req.resume_after = json_object_get_uint64(v);
                req.have_resume = true;
        }
        if (json_object_object_get_ex(obj, "request", &v)) {
                const char *what = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";

                req.status = strcmp(what, "status") == 0;
                req.files = strcmp(what, "files") == 0;
                if (!req.status && !req.files) {
                        why = "request must be \"status\" or \"files\"";
                        goto done;
                }
        }
        *ret_req = req;
        r = 0;
done:
        json_object_put(obj);
        if (why)
                *ret_why = why;
        return r;
}
