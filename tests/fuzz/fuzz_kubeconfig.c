/*
 * fuzz_kubeconfig — a kubeconfig file (kubeconfig_load: YAML, context,
 * cluster and user lookup, *-data base64, refused fields), and the same
 * bytes through base64_decode on their own.
 *
 * The file is a memory file opened through /proc/self/fd, so relative
 * paths in it resolve against /proc/self/fd (nothing is read from there:
 * kubeconfig_load only records paths).  Checked: a failure has a message;
 * a success has a server URL with a scheme; base64 output is at most 3/4
 * of the input.
 */
#include "fuzz.h"

#include "util/base64.h"
#include "util/buf.h"
#include "kube/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct kube_config cfg;
        struct buf err = BUF_INIT;
        char path[64], *dec = NULL;
        size_t dec_len = 0;
        int fd, r;

        fd = fuzz_memfile(data, size, path, sizeof(path));
        memset(&cfg, 0, sizeof(cfg));
        r = kubeconfig_load(path, NULL, &cfg, &err);
        if (r == 0) {
                FUZZ_ASSERT(cfg.server && strstr(cfg.server, "://"));
                FUZZ_ASSERT(cfg.context != NULL);
        } else {
                FUZZ_ASSERT(r == -ENOMEM || err.len > 0);
        }
        kube_config_free(&cfg);
        close(fd);
        buf_free(&err);

        r = base64_decode((const char *)data, size, &dec, &dec_len);
        if (r == 0) {
                FUZZ_ASSERT(dec != NULL && dec_len <= size / 4 * 3);
                free(dec);
        } else {
                FUZZ_ASSERT(r == -EINVAL || r == -ENOMEM);
        }
        return 0;
}
