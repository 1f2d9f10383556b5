/* Unit tests: the per-file members of the stream's messages
 * (stream/files_msg). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "failalloc.h"
#include "stream/files_msg.h"
#include "unit.h"

static const struct file_record_pod web_pod = {"default/web", "u1"};

static const struct file_record_view views[] = {
        {.source = "file",
         .path = "/m/a.yaml",
         .state = FILE_RECORD_APPLIED,
         .size = 10,
         .pods = &web_pod,
         .n_pods = 1,
         .seq = 7},
        {.source = "file", .path = "/m/b.yaml", .state = FILE_RECORD_REJECTED, .reason = "bad", .size = -1},
        {.source = "file", .path = "/m/c.yaml", .state = FILE_RECORD_APPLIED, .size = 3},
        {.source = "http", .path = "http://x/pods", .state = FILE_RECORD_UNREADABLE, .reason = "cannot", .size = -1},
};

static int each(void *data, int (*fn)(void *ctx, const struct file_record_view *v), void *ctx)
{
        size_t n = *(const size_t *)data;

        for (size_t i = 0; i < n; i++) {
                int r = fn(ctx, &views[i]);

                if (r < 0)
                        return r;
        }
        return 0;
}

/* The members as one JSON object: "{" + text without its first comma. */
static json_object *members(const struct buf *b)
{
        char *text = malloc(b->len + 2);
        json_object *o;

        ck_assert_ptr_nonnull(text);
        ck_assert(b->len > 0 && b->data[0] == ',');
        text[0] = '{';
        memcpy(text + 1, b->data + 1, b->len - 1);
        memcpy(text + b->len, "}", 2);
        o = json_tokener_parse(text);
        ck_assert_msg(o != NULL, "not JSON: %s", text);
        free(text);
        return o;
}

START_TEST(test_record_member)
{
        struct buf b = BUF_INIT;
        json_object *o, *f, *v;

        ck_assert_int_eq(files_msg_record(&views[0], &b), 0);
        o = members(&b);
        ck_assert(json_object_object_get_ex(o, "file", &f));
        ck_assert(json_object_object_get_ex(f, "state", &v));
        ck_assert_str_eq(json_object_get_string(v), "applied");
        ck_assert(json_object_object_get_ex(f, "seq", &v));
        ck_assert_int_eq(json_object_get_int64(v), 7);
        json_object_put(o);
        buf_free(&b);
}
END_TEST

/* The head: the path (its bytes in path_hex when not UTF-8), the
 * patterns in order, the URL or null. */
START_TEST(test_head)
{
        char *patterns[] = {"*.yaml", "*.json"};
        struct buf b = BUF_INIT;
        json_object *o, *v;

        ck_assert_int_eq(files_msg_head("/etc/m\xff", patterns, 2, NULL, &b), 0);
        o = members(&b);
        ck_assert(json_object_object_get_ex(o, "path_hex", &v));
        ck_assert_str_eq(json_object_get_string(v), "2f6574632f6dff");
        ck_assert(json_object_object_get_ex(o, "patterns", &v));
        ck_assert_int_eq(json_object_array_length(v), 2);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(v, 1)), "*.json");
        ck_assert(json_object_object_get_ex(o, "url", &v));
        ck_assert_ptr_null(v);
        json_object_put(o);
        buf_reset(&b);

        ck_assert_int_eq(files_msg_head(NULL, NULL, 0, "http://x/pods", &b), 0);
        o = members(&b);
        ck_assert(json_object_object_get_ex(o, "path", &v));
        ck_assert_ptr_null(v);
        ck_assert(json_object_object_get_ex(o, "url", &v));
        ck_assert_str_eq(json_object_get_string(v), "http://x/pods");
        json_object_put(o);
        buf_free(&b);
}
END_TEST

/* Counts per state; at most max records, those not applied first; the
 * rest counted as omitted. */
START_TEST(test_status_member)
{
        size_t n = 4;
        struct buf b = BUF_INIT;
        json_object *o, *files, *v, *recs;

        ck_assert_int_eq(files_msg_status(each, &n, 3, &b), 0);
        o = members(&b);
        ck_assert(json_object_object_get_ex(o, "files", &files));
        ck_assert(json_object_object_get_ex(files, "total", &v));
        ck_assert_int_eq(json_object_get_int(v), 4);
        ck_assert(json_object_object_get_ex(files, "states", &v));
        ck_assert_int_eq(json_object_get_int(json_object_object_get(v, "applied")), 2);
        ck_assert_int_eq(json_object_get_int(json_object_object_get(v, "rejected")), 1);
        ck_assert_int_eq(json_object_get_int(json_object_object_get(v, "unreadable")), 1);
        ck_assert(!json_object_object_get_ex(v, "gone", NULL));
        ck_assert(json_object_object_get_ex(files, "records", &recs));
        ck_assert_int_eq(json_object_array_length(recs), 3);
        ck_assert_str_eq(json_object_get_string(json_object_object_get(json_object_array_get_idx(recs, 0), "state")),
                         "rejected");
        ck_assert_str_eq(json_object_get_string(json_object_object_get(json_object_array_get_idx(recs, 2), "state")),
                         "applied");
        ck_assert(json_object_object_get_ex(files, "omitted", &v));
        ck_assert_int_eq(json_object_get_int(v), 1);
        json_object_put(o);
        buf_free(&b);
}
END_TEST

/* An error from the walk is returned as it is out of memory: -ENOMEM. */
static int failing_each(void *data, int (*fn)(void *ctx, const struct file_record_view *v), void *ctx)
{
        (void)data;
        (void)fn;
        (void)ctx;
        return -ENOMEM;
}

START_TEST(test_status_walk_fails)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(files_msg_status(failing_each, NULL, 10, &b), -ENOMEM);
        buf_free(&b);
}
END_TEST

/* Each allocation failing in turn: -ENOMEM, nothing kept beyond the
 * caller's buffer (which the caller frees). */
START_TEST(test_out_of_memory)
{
        char *patterns[] = {"*.yaml"};

        if (!failalloc_enabled())
                return;
        for (int which = 0; which < 3; which++) {
                for (long n = 1;; n++) {
                        struct buf b = BUF_INIT;
                        long before = failalloc_live();
                        size_t count = 4;
                        int r;

                        failalloc_arm(n);
                        r = which == 0   ? files_msg_record(&views[1], &b)
                            : which == 1 ? files_msg_head("/m", patterns, 1, "http://x", &b)
                                         : files_msg_status(each, &count, 2, &b);
                        failalloc_arm(0);
                        buf_free(&b);
                        ck_assert_int_eq(failalloc_live(), before);
                        if (r == 0)
                                break;
                        ck_assert_int_eq(r, -ENOMEM);
                }
        }
}
END_TEST

UNIT_MAIN(test_record_member, test_head, test_status_member, test_status_walk_fails, test_out_of_memory)
