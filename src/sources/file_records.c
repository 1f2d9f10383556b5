/*
 * file_records — see src/sources/file_records.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sources/file_records.h"

void file_records_unref(struct frec *r)
{
        if (r && --r->refs == 0) {
                free(r->text);
                free(r->ident);
                free(r);
        }
}

/* The record of path; made (pending, nothing read) when there is none and
 * create.  NULL when there is none, or for want of memory (create). */
struct frec *file_records_get(struct file_records *rs, const char *path, bool create)
{
        struct frec *r = keymap_get(rs->map, path);
        size_t len;

        if (r || !create)
                return r;
        len = strlen(path) + 1;
        r = calloc(1, sizeof(*r) + len);
        if (!r)
                return NULL;
        r->refs = 1;
        r->state = FILE_RECORD_PENDING;
        r->sent = FILE_RECORDS_SENT_NONE;
        r->size = -1;
        memcpy(r->path, path, len);
        if (keymap_put(rs->map, r, NULL) < 0) {
                free(r);
                return NULL;
        }
        return r;
}

void file_records_touch(struct file_records *rs, struct frec *r)
{
        if (r->dirty)
                return;
        r->dirty = true;
        r->refs++;
        r->dnext = NULL;
        if (rs->changed_tail)
                rs->changed_tail->dnext = r;
        else
                rs->changed_head = r;
        rs->changed_tail = r;
}

void file_records_unpend(struct file_records *rs, struct frec *r)
{
        if (r->sent == FILE_RECORDS_SENT_NONE)
                return;
        if (r->prev)
                r->prev->next = r->next;
        else
                rs->pend_head = r->next;
        if (r->next)
                r->next->prev = r->prev;
        else
                rs->pend_tail = r->prev;
        r->prev = r->next = NULL;
        r->sent = FILE_RECORDS_SENT_NONE;
}

void file_records_pending(struct file_records *rs, struct frec *r, uint64_t sent)
{
        if (r->state != FILE_RECORD_PENDING || r->text) {
                file_records_touch(rs, r);
                free(r->text);
                r->text = NULL;
                r->state = FILE_RECORD_PENDING;
        }
        if (sent == FILE_RECORDS_SENT_NONE)
                return;
        file_records_unpend(rs, r);
        r->sent = sent;
        r->carried = 0;
        r->prev = rs->pend_tail;
        r->next = NULL;
        if (rs->pend_tail)
                rs->pend_tail->next = r;
        else
                rs->pend_head = r;
        rs->pend_tail = r;
}

/* Sets a final state (not PENDING) with its reason (copied, bounded;
 * NULL none).  When the reason cannot be kept for want of memory, the
 * record says pending instead (read, not judged: never a verdict
 * without its reason) and a relist is asked for (rs->oom), which
 * sets it again. */
void file_records_set(struct file_records *rs, struct frec *r, enum file_record_state state, const char *reason)
{
        char *text = NULL;

        if (reason && !(text = file_record_reason_dup(reason))) {
                rs->oom = true;
                file_records_unpend(rs, r);
                file_records_pending(rs, r, FILE_RECORDS_SENT_NONE);
                return;
        }
        file_records_set_text(rs, r, state, text);
}

void file_records_set_text(struct file_records *rs, struct frec *r, enum file_record_state state, char *text)
{
        file_records_unpend(rs, r);
        if (r->state != state || (r->text == NULL) != (text == NULL) || (text && strcmp(r->text, text) != 0))
                file_records_touch(rs, r);
        free(r->text);
        r->text = text;
        r->state = state;
}

void file_records_applied(struct file_records *rs, struct frec *r, uint64_t seq)
{
        if (seq && r->seq != seq) {
                r->seq = seq;
                file_records_touch(rs, r);
        }
        file_records_set(rs, r, FILE_RECORD_APPLIED, NULL);
}

void file_records_no_pod(struct file_records *rs, struct frec *r)
{
        if (r->seq) {
                r->seq = 0;
                file_records_touch(rs, r);
        }
}

bool file_records_ident(struct file_records *rs, struct frec *r, const char *key, const char *uid)
{
        size_t kl, ul;
        char *id;

        if (!key) {
                free(r->ident);
                r->ident = NULL;
                return true;
        }
        kl = strlen(key) + 1;
        ul = strnlen(uid, FILE_RECORD_UID_MAX - 1);
        if (r->ident && strcmp(r->ident, key) == 0 && strlen(r->ident + kl) == ul &&
            memcmp(r->ident + kl, uid, ul) == 0)
                return true;
        id = malloc(kl + ul + 1);
        if (!id) {
                rs->oom = true;
                return false;
        }
        memcpy(id, key, kl);
        memcpy(id + kl, uid, ul);
        id[kl + ul] = '\0';
        free(r->ident);
        r->ident = id;
        file_records_touch(rs, r);
        return true;
}

static uint64_t timespec_usec(const struct timespec *t)
{
        return (uint64_t)t->tv_sec * 1000000u + (uint64_t)t->tv_nsec / 1000u;
}

void file_records_read(struct file_records *rs, struct frec *r, const struct static_pod_read *rd)
{
        if (rd->read)
                file_records_bytes(rs, r, rd->digest, (int64_t)rd->st.st_size, timespec_usec(&rd->st.st_mtim));
        else
                file_records_bytes(rs, r, NULL, -1, 0);
}

void file_records_bytes(struct file_records *rs, struct frec *r, const uint8_t *digest, int64_t size, uint64_t mtime)
{
        bool same = r->have_digest == (digest != NULL) && (!digest || memcmp(r->digest, digest, DIGEST_LEN) == 0);

        r->gone = false;
        if (same && size == r->size && mtime == r->mtime)
                return;
        file_records_touch(rs, r);
        r->size = size;
        r->mtime = mtime;
        r->have_digest = digest != NULL;
        if (digest)
                memcpy(r->digest, digest, DIGEST_LEN);
        if (!same && r->state != FILE_RECORD_PENDING)
                file_records_pending(rs, r, FILE_RECORDS_SENT_NONE);
}

void file_records_carried(struct frec *r, uint64_t seq)
{
        if (r->state == FILE_RECORD_PENDING && r->sent != FILE_RECORDS_SENT_NONE)
                r->carried = seq;
}

void file_records_stat(struct file_records *rs, struct frec *r, const struct stat *st)
{
        struct static_pod_read rd = {.read = false};

        file_records_read(rs, r, &rd);
        if (st && (r->size != (int64_t)st->st_size || r->mtime != timespec_usec(&st->st_mtim))) {
                r->size = (int64_t)st->st_size;
                r->mtime = timespec_usec(&st->st_mtim);
                file_records_touch(rs, r);
        }
}

void file_records_drop(struct file_records *rs, struct frec *r, uint64_t seq)
{
        if (keymap_get(rs->map, r->path) != r)
                return;
        (void)keymap_remove(rs->map, r->path);
        file_records_unpend(rs, r);
        file_records_touch(rs, r);
        r->state = FILE_RECORD_GONE;
        r->seq = seq;
        r->have_digest = false;
        r->size = -1;
        r->mtime = 0;
        free(r->text);
        r->text = NULL;
        file_records_unref(r); /* recs' reference */
}

void file_records_gone(struct file_records *rs, struct frec *r, uint64_t sent)
{
        if (!r->gone || r->have_digest) {
                r->gone = true;
                r->have_digest = false;
                r->size = -1;
                r->mtime = 0;
                file_records_touch(rs, r);
        }
        file_records_pending(rs, r, sent);
}

void file_records_flush(struct file_records *rs)
{
        struct frec *r;

        while ((r = rs->changed_head)) {
                struct file_record_view v;
                struct file_record_pod pod;

                rs->changed_head = r->dnext;
                if (!rs->changed_head)
                        rs->changed_tail = NULL;
                r->dirty = false;
                if (rs->record_fn) {
                        rs->view(rs->view_data, r, &v, &pod);
                        rs->record_fn(rs->record_data, &v);
                }
                file_records_unref(r);
        }
}

bool file_records_waiting(const struct file_records *rs)
{
        return rs->pend_head != NULL;
}

/* What still waits for those sends made no difference to consumers (the
 * merger found the pod it had, or the mode sends no such change): applied
 * as it was; a gone file's removal is done. */
void file_records_merged(struct file_records *rs, uint64_t through)
{
        struct frec *r;

        while ((r = rs->pend_head) && r->sent <= through) {
                if (r->gone)
                        file_records_drop(rs, r, rs->last_seq);
                else if (r->carried)
                        file_records_applied(rs, r, r->carried);
                else
                        file_records_applied(rs, r, r->seq ? 0 : rs->last_seq);
        }
        file_records_flush(rs);
}

static int cmp_rec(const void *a, const void *b)
{
        return strcmp((*(struct frec *const *)a)->path, (*(struct frec *const *)b)->path);
}

int file_records_each(struct file_records *rs, int (*fn)(void *data, const struct file_record_view *v), void *data)
{
        size_t n = keymap_size(rs->map), i = 0, it = 0;
        struct frec **all = malloc((n ? n : 1) * sizeof(*all));
        int r = 0;
        void *v;

        if (!all)
                return -ENOMEM;
        while (keymap_next(rs->map, &it, &v))
                all[i++] = v;
        qsort(all, n, sizeof(*all), cmp_rec);
        for (i = 0; i < n && r >= 0; i++) {
                struct file_record_view view;
                struct file_record_pod pod;

                rs->view(rs->view_data, all[i], &view, &pod);
                r = fn(data, &view);
        }
        free(all);
        return r < 0 ? r : 0;
}

size_t file_records_count(const struct file_records *rs)
{
        return keymap_size(rs->map);
}

static const char *rec_path(const void *v)
{
        return ((const struct frec *)v)->path;
}

int file_records_init(struct file_records *rs,
                      void (*view)(void *data, const struct frec *r, struct file_record_view *v,
                                   struct file_record_pod *pod),
                      void *view_data, void (*record_fn)(void *data, const struct file_record_view *v),
                      void *record_data)
{
        *rs = (struct file_records){
                .view = view,
                .view_data = view_data,
                .record_fn = record_fn,
                .record_data = record_data,
        };
        rs->map = keymap_new(rec_path);
        return rs->map ? 0 : -ENOMEM;
}

static void rec_unref_item(void *v)
{
        file_records_unref(v);
}

void file_records_clear(struct file_records *rs)
{
        while (rs->changed_head) {
                struct frec *r = rs->changed_head;

                rs->changed_head = r->dnext;
                file_records_unref(r);
        }
        rs->changed_tail = NULL;
        keymap_free(rs->map, rec_unref_item);
        rs->map = NULL;
        rs->pend_head = rs->pend_tail = NULL;
}
