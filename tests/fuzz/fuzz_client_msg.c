/*
 * fuzz_client_msg — one line from the daemon as libpodmux-client reads it
 * (client_msg_parse, src/client/client_msg.c), then applied to a cache
 * the way a live message is (src/client/client_cache.c).  Checked: an
 * error has a reason (or is out of memory, or a protocol mismatch); every
 * pod of an accepted line has a uid and a name, and its text is one JSON
 * object, and its identity is the one a json-c tree of that text holds
 * (the decoder steps over pods without building one); the cache stays sorted and its uid index finds every pod.
 */
#include "fuzz.h"

#include "util/json_get.h"
#include "util/json_parse.h"
#include "../../src/client/client_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct client_msg m;
        struct buf why = BUF_INIT;
        struct cache c = {0};
        int r = client_msg_parse((const char *)data, size, &m, &why);

        if (r < 0) {
                FUZZ_ASSERT(r == -EINVAL || r == -ENOMEM || r == -EPROTONOSUPPORT);
                FUZZ_ASSERT(r != -EINVAL || why.len > 0);
                client_msg_clear(&m);
                buf_free(&why);
                return 0;
        }
        for (size_t i = 0; i < m.n_pods; i++) {
                json_object *o = NULL, *md;

                FUZZ_ASSERT(m.pods[i]->uid[0] && m.pods[i]->name && m.pods[i]->source);
                r = json_parse(m.pods[i]->json, m.pods[i]->len, 80, &o, NULL);
                FUZZ_ASSERT(r == 0);
                FUZZ_ASSERT(json_object_is_type(o, json_type_object));
                md = json_get(o, "metadata");
                FUZZ_ASSERT(strcmp(m.pods[i]->uid, json_get_str(md, "uid", "")) == 0);
                FUZZ_ASSERT(strcmp(m.pods[i]->name, json_get_str(md, "name", "")) == 0);
                FUZZ_ASSERT(strcmp(m.pods[i]->ns, json_get_str(md, "namespace", "")) == 0);
                FUZZ_ASSERT(strcmp(m.pods[i]->ann_source,
                                   json_get_str(json_get(md, "annotations"), "kubernetes.io/config.source", "")) == 0);
                json_object_put(o);
        }
        /* Twice: the second finds every pod already there. */
        for (int k = 0; k < 2 && m.type == CLIENT_MSG_PODS; k++) {
                struct cache_prep prep;

                if (cache_pods_prepare(&c, &m, &prep) == 0) {
                        cache_pods_commit(&c, &m, &prep);
                        cache_prep_free(&prep);
                }
        }
        if (m.type == CLIENT_MSG_PLUGIN)
                (void)cache_plugin_apply(&c, &m);
        for (size_t i = 0; i < c.n; i++) {
                FUZZ_ASSERT(i == 0 || client_pod_compare(c.v[i - 1], c.v[i]) < 0);
                FUZZ_ASSERT(cache_by_uid(&c, c.v[i]->uid) != NULL);
        }
        cache_free(&c);
        client_msg_clear(&m);
        buf_free(&why);
        return 0;
}
