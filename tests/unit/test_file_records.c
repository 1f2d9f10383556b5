/* Unit tests: the records' life cycle (sources/file_records), as the file
 * and URL sources drive it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/file_records.h"
#include "failalloc.h"
#include "unit.h"

/* What the record callback was told, in order: "path state seq" lines. */
struct told {
        char text[1024];
        int n;
};

static void view(void *data, const struct frec *r, struct file_record_view *v, struct file_record_pod *pod)
{
        *v = (struct file_record_view){
                .source = "file",
                .path = r->path,
                .state = (enum file_record_state)r->state,
                .reason = r->text,
                .size = r->size,
                .pods = pod,
                .seq = r->seq,
        };
}

static void record(void *data, const struct file_record_view *v)
{
        struct told *t = data;
        size_t len = strlen(t->text);

        snprintf(t->text + len, sizeof(t->text) - len, "%s%s %s %llu", len ? "; " : "", v->path,
                 file_record_state_name(v->state), (unsigned long long)v->seq);
        t->n++;
}

static int collect(void *data, const struct file_record_view *v)
{
        record(data, v);
        return 0;
}

/* Pending under a send, carried by two messages, applied with the last
 * when the send is merged; without a carry, with the last message of the
 * owner's. */
START_TEST(test_carried_then_merged)
{
        struct file_records rs;
        struct told t = {0};
        struct frec *a, *b;
        uint8_t d[DIGEST_LEN] = {1};

        ck_assert_int_eq(file_records_init(&rs, view, NULL, record, &t), 0);
        a = file_records_get(&rs, "a", true);
        b = file_records_get(&rs, "b", true);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        file_records_bytes(&rs, a, d, 3, 0);
        file_records_pending(&rs, a, 1);
        file_records_bytes(&rs, b, d, 4, 0);
        file_records_pending(&rs, b, 2);
        file_records_flush(&rs);
        ck_assert_str_eq(t.text, "a pending 0; b pending 0");
        ck_assert(file_records_waiting(&rs));
        t = (struct told){0};
        file_records_carried(a, 7);
        file_records_carried(a, 8);
        rs.last_seq = 9;
        file_records_merged(&rs, 1);
        ck_assert_str_eq(t.text, "a applied 8");
        ck_assert(file_records_waiting(&rs));
        t = (struct told){0};
        file_records_merged(&rs, 2);
        ck_assert_str_eq(t.text, "b applied 9");
        ck_assert(!file_records_waiting(&rs));
        /* Merged again: nothing waits, nothing is told. */
        t = (struct told){0};
        file_records_merged(&rs, 3);
        ck_assert_int_eq(t.n, 0);
        file_records_clear(&rs);
}
END_TEST

/* A gone record is dropped when its removal is merged, told as gone with
 * the owner's last message; the rest are listed in path order. */
START_TEST(test_gone_and_listed)
{
        struct file_records rs;
        struct told t = {0};
        struct frec *r;

        ck_assert_int_eq(file_records_init(&rs, view, NULL, record, &t), 0);
        ck_assert_ptr_nonnull(file_records_get(&rs, "c", true));
        ck_assert_ptr_nonnull(r = file_records_get(&rs, "b", true));
        ck_assert_ptr_nonnull(file_records_get(&rs, "a", true));
        ck_assert_ptr_eq(file_records_get(&rs, "b", false), r);
        ck_assert_ptr_null(file_records_get(&rs, "d", false));
        ck_assert_uint_eq(file_records_count(&rs), 3);
        file_records_gone(&rs, r, 4);
        file_records_flush(&rs);
        t = (struct told){0};
        rs.last_seq = 9;
        file_records_merged(&rs, 4);
        ck_assert_str_eq(t.text, "b gone 9");
        ck_assert_uint_eq(file_records_count(&rs), 2);
        t = (struct told){0};
        ck_assert_int_eq(file_records_each(&rs, collect, &t), 0);
        ck_assert_str_eq(t.text, "a pending 0; c pending 0");
        file_records_clear(&rs);
}
END_TEST

/* Several changes between flushes are told once; a change that changes
 * nothing is not told. */
START_TEST(test_told_once)
{
        struct file_records rs;
        struct told t = {0};
        struct frec *r;

        ck_assert_int_eq(file_records_init(&rs, view, NULL, record, &t), 0);
        ck_assert_ptr_nonnull(r = file_records_get(&rs, "a", true));
        file_records_set(&rs, r, FILE_RECORD_REJECTED, "bad");
        file_records_set(&rs, r, FILE_RECORD_IGNORED, "left out");
        file_records_flush(&rs);
        ck_assert_str_eq(t.text, "a ignored 0");
        t = (struct told){0};
        file_records_set(&rs, r, FILE_RECORD_IGNORED, "left out");
        file_records_flush(&rs);
        ck_assert_int_eq(t.n, 0);
        file_records_touch(&rs, r);
        file_records_flush(&rs);
        ck_assert_int_eq(t.n, 1);
        file_records_clear(&rs);
}
END_TEST

/* A reason that cannot be kept leaves the record pending (never a
 * verdict without its reason) and says so in oom. */
START_TEST(test_reason_out_of_memory)
{
        struct file_records rs;
        struct told t = {0};
        struct frec *r;

        if (!failalloc_enabled())
                return;
        ck_assert_int_eq(file_records_init(&rs, view, NULL, record, &t), 0);
        ck_assert_ptr_nonnull(r = file_records_get(&rs, "a", true));
        file_records_set(&rs, r, FILE_RECORD_APPLIED, NULL);
        failalloc_arm(1);
        file_records_set(&rs, r, FILE_RECORD_REJECTED, "bad");
        ck_assert(failalloc_failed());
        failalloc_arm(0);
        ck_assert(rs.oom);
        ck_assert_int_eq(r->state, FILE_RECORD_PENDING);
        ck_assert_ptr_null(r->text);
        file_records_clear(&rs);
}
END_TEST

UNIT_MAIN(test_carried_then_merged, test_gone_and_listed, test_told_once, test_reason_out_of_memory)
