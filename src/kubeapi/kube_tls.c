/*
 * kube_tls — the kube-api address's serving certificate (see
 * src/kubeapi/kube_tls.h).  libcrypto makes the self-signed pair: an EC
 * P-256 key and a certificate for the host, localhost, 127.0.0.1 and ::1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "kubeapi/kube_tls.h"
#include "util/file.h"
#include "util/log.h" /* ERRNO_STR only: this module never logs */

int kube_tls_read(const char *path, char **ret_pem, struct buf *err)
{
        struct buf why = BUF_INIT;
        size_t len;
        int r = file_read(path, KUBE_TLS_MAX_PEM, ret_pem, &len, &why);

        /* file_read() says why, not which file. */
        if (r < 0 && r != -ENOMEM)
                r = buf_set_err(err, r, "\"%s\": %s", path, why.len ? why.data : ERRNO_STR(r));
        else if (r == -ENOMEM && err)
                buf_reset(err);
        buf_free(&why);
        return r;
}

static char *join(const char *dir, const char *name)
{
        char *p = NULL;

        if (asprintf(&p, "%s/%s", dir, name) < 0)
                return NULL;
        return p;
}

/* BIO memory contents as a heap string. */
static char *bio_text(BIO *b)
{
        char *data, *out;
        long n = BIO_get_mem_data(b, &data);

        if (n < 0 || !(out = malloc((size_t)n + 1)))
                return NULL;
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
        return out;
}

static int add_ext(X509 *x, int nid, const char *value)
{
        X509V3_CTX ctx;
        X509_EXTENSION *e;
        int ok;

        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!e)
                return -1;
        ok = X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
        return ok ? 0 : -1;
}

/* A new self-signed pair for host, as PEM. */
static int generate(const char *host, char **ret_cert, char **ret_key)
{
        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        X509_NAME *name;
        BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
        char san[600];
        int r = -ENOMEM;

        if (!key || !x || !cb || !kb)
                goto out;
        (void)snprintf(san, sizeof(san), "DNS:%s,DNS:localhost,IP:127.0.0.1,IP:::1", host);
        name = X509_get_subject_name(x);
        if (!X509_set_version(x, 2) || !ASN1_INTEGER_set(X509_get_serialNumber(x), (long)time(NULL)) ||
            !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
            !X509_gmtime_adj(X509_getm_notAfter(x), (long)KUBE_TLS_DAYS * 86400) || !X509_set_pubkey(x, key) ||
            !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)host, -1, -1, 0) ||
            !X509_set_issuer_name(x, name) || add_ext(x, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
            add_ext(x, NID_key_usage, "critical,digitalSignature,keyEncipherment,keyCertSign") < 0 ||
            add_ext(x, NID_ext_key_usage, "serverAuth") < 0 || add_ext(x, NID_subject_alt_name, san) < 0 ||
            !X509_sign(x, key, EVP_sha256()) || !PEM_write_bio_X509(cb, x) ||
            !PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL)) {
                r = -EIO;
                goto out;
        }
        if (!(*ret_cert = bio_text(cb)))
                goto out;
        if (!(*ret_key = bio_text(kb))) {
                free(*ret_cert);
                goto out;
        }
        r = 0;
out:
        BIO_free(cb);
        BIO_free(kb);
        X509_free(x);
        EVP_PKEY_free(key);
        return r;
}

/* Writes text to path, created with mode, never replacing a file. */
static int write_new(const char *path, const char *text, mode_t mode)
{
        size_t len = strlen(text), done = 0;
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode), r = 0;

        if (fd < 0)
                return -errno;
        while (done < len) {
                ssize_t w = write(fd, text + done, len - done);

                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                done += (size_t)w;
        }
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r < 0)
                unlink(path);
        return r;
}

/* mkdir -p, the new directories 0700, as the kubelet makes its cert
 * dir with its parents. */
static int mkdir_parents(const char *dir)
{
        char *p = strdup(dir);
        int r = 0;

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1;; s++) {
                if (*s != '/' && *s)
                        continue;
                char c = *s;

                *s = '\0';
                if (mkdir(p, 0700) < 0 && errno != EEXIST) {
                        r = -errno;
                        break;
                }
                if (!(*s = c))
                        break;
        }
        free(p);
        return r;
}

int kube_tls_load(const struct kube_tls_config *cfg, char **ret_cert, char **ret_key, struct buf *err)
{
        char *cert_path = NULL, *key_path = NULL, *cert = NULL, *key = NULL;
        int r;

        if (cfg->cert_file) {
                if ((r = kube_tls_read(cfg->cert_file, &cert, err)) < 0 ||
                    (r = kube_tls_read(cfg->key_file, &key, err)) < 0)
                        goto out;
                goto done;
        }
        cert_path = join(cfg->cert_dir, KUBE_TLS_CERT_NAME);
        key_path = join(cfg->cert_dir, KUBE_TLS_KEY_NAME);
        r = -ENOMEM;
        if (!cert_path || !key_path)
                goto out;
        if (access(cert_path, F_OK) == 0 || access(key_path, F_OK) == 0) {
                if ((r = kube_tls_read(cert_path, &cert, err)) < 0 || (r = kube_tls_read(key_path, &key, err)) < 0)
                        goto out;
                goto done;
        }
        if ((r = mkdir_parents(cfg->cert_dir)) < 0) {
                r = r == -ENOMEM ? r
                                 : buf_set_err(err, r, "--kube-api-cert-dir \"%s\": %s", cfg->cert_dir, ERRNO_STR(r));
                goto out;
        }
        if ((r = generate(cfg->host, &cert, &key)) < 0) {
                if (r != -ENOMEM)
                        r = buf_set_err(err, r, "--kube-api-cert-dir \"%s\": cannot make a self-signed certificate",
                                        cfg->cert_dir);
                goto out;
        }
        /* The key first: a certificate is never there without its key. */
        if ((r = write_new(key_path, key, 0600)) < 0 || (r = write_new(cert_path, cert, 0644)) < 0) {
                r = buf_set_err(err, r, "--kube-api-cert-dir \"%s\": cannot write the self-signed pair: %s",
                                cfg->cert_dir, ERRNO_STR(r));
                unlink(key_path);
                goto out;
        }
done:
        *ret_cert = cert;
        *ret_key = key;
        cert = key = NULL;
        r = 0;
out:
        if (r == -ENOMEM && err)
                buf_reset(err);
        free(cert);
        free(key);
        free(cert_path);
        free(key_path);
        return r;
}
