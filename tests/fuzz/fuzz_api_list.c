/*
 * fuzz_api_list — one page of the API server's pod list
 * (api_decode_list_page), into a pod store as the API source keeps it, and
 * the store's pods as consumers get them.  Checked: a failure has a
 * message; resourceVersion and continue come back only on success; every
 * stored pod renders as valid JSON in UTF-8.
 */
#include "fuzz.h"

#include "podmux/api_decode.h"
#include "podmux/buf.h"
#include "podmux/pod.h"

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
        free(rv);
        free(cont);
        buf_free(&out);
        buf_free(&err);
        api_store_free(store);
        return 0;
}
