/*
 * fuzz_api_watch — the API server's watch stream (watch_decoder_feed)
 * applied to a pod store as the API source applies it, split into reads
 * at points the input chooses, so events that span reads and reads that
 * hold several events are both exercised.
 *
 * Input: 4 bytes of read sizes (each 1-255 bytes, 0 = the rest), used in
 * turn, then the stream.  The same stream is also fed in one read to a
 * second decoder; both must end the same way: same result, same error
 * code, same resourceVersion, same number of events and the same pods.
 * Every stored pod must render as valid JSON in UTF-8.
 */
#include "fuzz.h"

#include "kube/api_decode.h"
#include "util/buf.h"
#include "core/pod.h"

#define HEADER 4

struct run {
        struct watch_decoder *dec;
        struct strmap *store;
        char *rv;
        long code;
        size_t events, bookmarks;
        struct buf err;
        int r;
};

static void on_event(void *arg, enum watch_event_type t, struct pod *old, struct pod *new)
{
        (void)old;
        (void)new;
        struct run *run = arg;

        run->events++;
        if (t == WATCH_BOOKMARK)
                run->bookmarks++;
}

static void run_init(struct run *run)
{
        memset(run, 0, sizeof(*run));
        buf_init(&run->err);
        run->dec = watch_decoder_new();
        run->store = strmap_new();
        FUZZ_ASSERT(run->dec && run->store);
}

static void run_free(struct run *run)
{
        watch_decoder_free(run->dec);
        api_store_free(run->store);
        free(run->rv);
        buf_free(&run->err);
}

static void feed(struct run *run, const char *data, size_t len)
{
        run->r = watch_decoder_feed(run->dec, data, len, run->store, &run->rv, on_event, run,
                                    &run->code, &run->err);
        if (run->r < 0) {
                FUZZ_ASSERT(run->r == -EPROTO || run->r == -EBADMSG || run->r == -ENOMEM);
                FUZZ_ASSERT(run->r != -EBADMSG || run->err.len > 0);
        }
}

/* Renders the store in key order (strmap order may depend on history). */
static void render_store(struct strmap *store, struct buf *out)
{
        size_t n = strmap_size(store), i = 0, it = 0;
        const char **keys = calloc(n ? n : 1, sizeof(*keys));
        const char *key;
        void *v;

        FUZZ_ASSERT(keys != NULL);
        while (strmap_next(store, &it, &key, &v))
                keys[i++] = key;
        FUZZ_ASSERT(i == n);
        for (i = 1; i < n; i++) /* insertion sort: stores are small here */
                for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
                        const char *t = keys[j];

                        keys[j] = keys[j - 1];
                        keys[j - 1] = t;
                }
        for (i = 0; i < n; i++) {
                size_t start = out->len;

                FUZZ_ASSERT(buf_puts(out, keys[i]) == 0 && buf_putc(out, '=') == 0);
                start = out->len;
                FUZZ_ASSERT(pod_render(strmap_get(store, keys[i]), out) == 0);
                fuzz_check_json(out->data + start, out->len - start, "a watched pod's stream text");
                FUZZ_ASSERT(buf_putc(out, '\n') == 0);
        }
        free(keys);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct run split, whole;
        struct buf a = BUF_INIT, b = BUF_INIT;
        const char *stream;
        size_t len, off = 0, k = 0;

        if (size < HEADER)
                return 0;
        stream = (const char *)data + HEADER;
        len = size - HEADER;
        run_init(&split);
        run_init(&whole);

        while (off < len && split.r == 0) {
                size_t n = data[k++ % HEADER];

                if (n == 0 || n > len - off)
                        n = len - off;
                feed(&split, stream + off, n);
                off += n;
        }
        if (len > 0)
                feed(&whole, stream, len);

        FUZZ_ASSERT(split.r == whole.r);
        FUZZ_ASSERT(split.r == 0 || split.code == whole.code);
        FUZZ_ASSERT(split.events == whole.events && split.bookmarks == whole.bookmarks);
        FUZZ_ASSERT((split.rv == NULL) == (whole.rv == NULL));
        FUZZ_ASSERT(!split.rv || strcmp(split.rv, whole.rv) == 0);
        render_store(split.store, &a);
        render_store(whole.store, &b);
        FUZZ_ASSERT(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);

        buf_free(&a);
        buf_free(&b);
        run_free(&split);
        run_free(&whole);
        return 0;
}
