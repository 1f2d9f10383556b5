/*
 * kube_tls — the serving certificate of --kube-api-address: read from
 * --kube-api-tls-cert-file and --kube-api-tls-private-key-file, or, when
 * neither is given, a self-signed pair kept in --kube-api-cert-dir, made
 * there the first time as the kubelet makes its own in its cert dir.
 *
 * Owns: nothing past a call; the PEM texts it returns are the caller's.
 * Never: logs; overwrites a pair that exists; writes the key readable by
 * anyone but the daemon's user (0600).
 * Cost: a key generation (EC P-256, libcrypto) the first time only.
 */
#ifndef PODMUX_KUBE_TLS_H
#define PODMUX_KUBE_TLS_H

#include "util/buf.h"

/* The generated pair's names in the cert dir. */
#define KUBE_TLS_CERT_NAME "podmux-kube-api.crt"
#define KUBE_TLS_KEY_NAME "podmux-kube-api.key"
/* How long a generated certificate is valid (the kubelet's: a year). */
#define KUBE_TLS_DAYS 365
/* The largest PEM file read. */
#define KUBE_TLS_MAX_PEM (1024 * 1024)

struct kube_tls_config {
        const char *cert_file; /* both or neither */
        const char *key_file;
        const char *cert_dir; /* without the files: where the pair lives */
        const char *host;     /* a name the generated certificate is for */
};

/* The certificate and key as PEM text (NUL-terminated, the caller's).
 * 0, or -errno with the file and the reason in err (util/buf.h). */
int kube_tls_load(const struct kube_tls_config *cfg, char **ret_cert, char **ret_key, struct buf *err);

/* Reads a PEM file (a CA bundle) whole.  0 or -errno with err. */
int kube_tls_read(const char *path, char **ret_pem, struct buf *err);

#endif
