/*
 * fuzz_api_list — one page of the API server's pod list
 * (api_decode_list_page), into a pod store as the API source keeps it, and
 * the store's pods as consumers get them.  Checked: a failure has a
 * message; resourceVersion and continue come back only on success; every
 * stored pod renders as valid JSON in UTF-8; the bytes fed in reads (of a
 * size the input's first byte picks) give the same outcome as whole.
 */
#include "fuzz.h"

#include "kube/api_decode.h"
#include "util/buf.h"
#include "core/pod.h"

/* The outcome of the bytes fed to a list decoder in reads of chunk. */
static int in_reads(const uint8_t *data, size_t size, size_t chunk, struct strmap *store, char **rv, char **cont,
                    struct buf *err)
{
        struct list_decoder *d = list_decoder_new();
        int r = d ? 0 : -ENOMEM;

        for (size_t at = 0; r == 0 && at < size; at += chunk)
                r = list_decoder_feed(d, (const char *)data + at, size - at < chunk ? size - at : chunk, err);
        if (r == 0)
                r = list_decoder_finish(d, store, rv, cont, err);
        list_decoder_free(d);
        return r;
}

static bool same_str(const char *a, const char *b)
{
        return a ? b && strcmp(a, b) == 0 : !b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct strmap *store = strmap_new();
        struct buf err = BUF_INIT, out = BUF_INIT;
        char *rv = NULL, *cont = NULL;
        size_t it = 0;
        const char *key;
        void *v;
        int r;

        FUZZ_ASSERT(store != NULL);
        r = api_decode_list_page((const char *)data, size, store, &rv, &cont, &err);
        if (r == 0) {
                FUZZ_ASSERT(!cont || cont[0]);
        } else {
                FUZZ_ASSERT(r == -EINVAL || r == -ENOMEM);
                FUZZ_ASSERT(!rv && !cont);
                FUZZ_ASSERT(r == -ENOMEM || err.len > 0);
        }
        /* Even after a failure the store holds whole pods only. */
        while (strmap_next(store, &it, &key, &v)) {
                buf_reset(&out);
                FUZZ_ASSERT(pod_render(v, &out) == 0);
                fuzz_check_json(out.data, out.len, "a listed pod's stream text");
        }
        {
                struct strmap *again = strmap_new();
                struct buf err2 = BUF_INIT;
                char *rv2 = NULL, *cont2 = NULL;
                int r2;

                FUZZ_ASSERT(again != NULL);
                r2 = in_reads(data, size, size ? data[0] % 13 + 1 : 1, again, &rv2, &cont2, &err2);
                FUZZ_ASSERT(r2 == r || r2 == -ENOMEM || r == -ENOMEM);
                if (r2 == r && r != -ENOMEM) {
                        FUZZ_ASSERT(same_str(rv, rv2) && same_str(cont, cont2));
                        FUZZ_ASSERT(strcmp(err.len ? err.data : "", err2.len ? err2.data : "") == 0);
                        FUZZ_ASSERT(strmap_size(again) == strmap_size(store));
                }
                free(rv2);
                free(cont2);
                buf_free(&err2);
                api_store_free(again);
        }
        free(rv);
        free(cont);
        buf_free(&out);
        buf_free(&err);
        api_store_free(store);
        return 0;
}
