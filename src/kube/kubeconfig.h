/*
 * kubeconfig — the API server connection settings: a kubeconfig file
 * (doc/api-source.md section 9) or the in-cluster service account
 * (section 8.4).
 *
 * Owns: the resolved settings (server URL, CA, client certificate and key,
 * token or token file, TLS options).
 * Never: opens connections, reads the token file (the API source re-reads
 * it as client-go does), or puts a token or key into an error message.
 *
 * Only the one explicit path is read (no KUBECONFIG merging); exec and
 * auth-provider plugins, basic auth, impersonation and proxy-url are
 * refused with a message naming the field.
 */
#ifndef PODMUX_KUBECONFIG_H
#define PODMUX_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

#define KUBE_SERVICE_ACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* A kubeconfig this large or larger is refused: far above any real one
 * (certificates inline included), it only stops a runaway file. */
#define KUBECONFIG_MAX_BYTES (16u * 1024u * 1024u)

/* PEM bytes decoded from a *-data field. */
struct kube_blob {
        char *data;
        size_t len;
};

struct kube_config {
        char *server;  /* scheme://host[:port][/prefix], no trailing '/' */
        char *ca_file; /* absolute or as given; NULL if none */
        struct kube_blob ca_data;
        char *cert_file;
        struct kube_blob cert_data;
        char *key_file;
        struct kube_blob key_data;
        char *token;      /* inline token; NULL if none */
        char *token_file; /* re-read by the API source */
        bool insecure;    /* insecure-skip-tls-verify */
        char *tls_server_name;
        char *context; /* the context used (for messages) */
};

/*
 * Loads path, using context (or current-context when NULL).  Relative paths
 * are resolved against the kubeconfig's folder.  On error returns -EINVAL
 * (or -errno for I/O) with a message naming the file and the field.
 */
int kubeconfig_load(const char *path, const char *context, struct kube_config *ret_cfg, struct buf *err);
/* In-cluster settings from KUBERNETES_SERVICE_HOST/PORT and the service
 * account folder (sa_dir, or KUBE_SERVICE_ACCOUNT_DIR when NULL). */
int kubeconfig_in_cluster(const char *sa_dir, struct kube_config *ret_cfg, struct buf *err);
void kube_config_free(struct kube_config *c); /* NULL-safe */

#endif
