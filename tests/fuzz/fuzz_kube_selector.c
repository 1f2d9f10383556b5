/*
 * fuzz_kube_selector — a labelSelector and a fieldSelector of the
 * Kubernetes API view (kv_filter_parse), as a client sends them in a
 * query: the input up to its first NUL is the label selector, the rest
 * the field selector.  Checked: a refusal has a reason; an accepted pair
 * can be matched against a pod; the filter frees whole.
 */
#include "fuzz.h"

#include "kubeapi/kube_view.h"

static struct kv_obj *object(void)
{
        static struct kv_obj *o;
        static char ns[] = "ns\0name";

        if (o)
                return o;
        o = calloc(1, sizeof(*o));
        FUZZ_ASSERT(o);
        o->refs = 1;
        o->ns = ns;
        o->name = ns + 3;
        for (int i = 0; i < _KV_FIELD_MAX; i++)
                o->fields[i] = (char *)"x";
        o->labels = json_tokener_parse("{\"app\":\"web\",\"n\":\"5\",\"a.b/c\":\"\"}");
        return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = malloc(size + 2);
        const char *fields;
        struct kv_filter f = {0};
        struct buf err = BUF_INIT;
        int r;

        FUZZ_ASSERT(text);
        if (size)
                memcpy(text, data, size);
        text[size] = '\0';
        text[size + 1] = '\0';
        fields = text + strlen(text) + 1;
        if (fields > text + size)
                fields = "";
        r = kv_filter_parse(&f, text, fields, &err);
        if (r == 0)
                (void)kv_filter_match(&f, object());
        else
                FUZZ_ASSERT(r == -ENOMEM || (r == -EINVAL && err.len > 0));
        kv_filter_free(&f);
        buf_free(&err);
        free(text);
        return 0;
}
