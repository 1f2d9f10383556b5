/*
 * grpc_client — unary gRPC over libcurl HTTP/2 on a unix socket (see
 * src/plugins/grpc_client.h and doc/plugin-manager.md section 13).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "plugins/grpc_client.h"

struct grpc_call {
        struct loop *loop;
        struct curl_loop *cl;
        grpc_done_fn fn;
        void *data;
        char *socket_path;
        char *url;
        uint8_t *body;          /* 5-byte prefix + request */
        size_t body_len;
        uint64_t deadline;
        uint64_t dial_until;    /* monotonic */
        uint64_t retry_delay;
        CURL *easy;
        struct curl_slist *hdrs;
        struct loop_timer *timer;
        struct buf reply;
        int grpc_status;        /* -1 until seen */
        char *grpc_message;
        int too_large;
};

static void call_free(struct grpc_call *c)
{
        curl_loop_cancel(c->cl, &c->easy);
        curl_slist_free_all(c->hdrs);
        loop_timer_free(c->timer);
        buf_free(&c->reply);
        free(c->grpc_message);
        free(c->socket_path);
        free(c->url);
        free(c->body);
        free(c);
}

void grpc_call_cancel(struct grpc_call *call)
{
        if (call)
                call_free(call);
}

static void finish(struct grpc_call *c, int status, const char *message, const uint8_t *reply,
                   size_t len)
{
        c->fn(c->data, status, message ? message : "", reply, len);
        call_free(c);
}

int grpc_message_decode(const char *s, size_t n, char **ret)
{
        char *out = malloc(n + 1);
        size_t o = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                    isxdigit((unsigned char)s[i + 2])) {
                        char hex[3] = {s[i + 1], s[i + 2], 0};

                        out[o++] = (char)strtol(hex, NULL, 16);
                        i += 2;
                } else {
                        out[o++] = s[i];
                }
        }
        out[o] = '\0';
        *ret = out;
        return 0;
}

int grpc_unframe(const uint8_t *data, size_t len, const uint8_t **ret_msg, size_t *ret_len,
                 const char **ret_why)
{
        uint32_t mlen;

        if (len < 5) {
                *ret_why = "reply without a message";
                return -EBADMSG;
        }
        if (data[0] != 0) {
                *ret_why = "compressed reply";
                return -EBADMSG;
        }
        mlen = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4];
        if ((size_t)mlen + 5 != len) {
                *ret_why = "reply length does not match its prefix";
                return -EBADMSG;
        }
        *ret_msg = data + 5;
        *ret_len = mlen;
        return 0;
}

static size_t on_header(char *line, size_t size, size_t n, void *data)
{
        struct grpc_call *c = data;
        size_t len = size * n, vlen;
        const char *v;

        /* Trailers come through here too. */
        if (len > 12 && strncasecmp(line, "grpc-status:", 12) == 0) {
                c->grpc_status = (int)strtol(line + 12, NULL, 10);
        } else if (len > 13 && strncasecmp(line, "grpc-message:", 13) == 0) {
                v = line + 13;
                while (*v == ' ' || *v == '\t')
                        v++;
                vlen = len - (size_t)(v - line);
                while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n'))
                        vlen--;
                free(c->grpc_message);
                c->grpc_message = NULL;
                (void)grpc_message_decode(v, vlen, &c->grpc_message); /* NULL on ENOMEM: "" */
        }
        return len;
}

static size_t on_write(char *ptr, size_t size, size_t n, void *data)
{
        struct grpc_call *c = data;
        size_t len = size * n;

        if (c->reply.len + len > GRPC_MAX_MESSAGE + 5 || buf_append(&c->reply, ptr, len) < 0) {
                c->too_large = 1;
                return 0;
        }
        return len;
}

static void start(struct grpc_call *c);

static void on_retry(struct loop_timer *t, void *data)
{
        start(data);
}

static void on_done(void *data, CURL *easy, CURLcode result)
{
        struct grpc_call *c = data;
        long http = 0;
        char msg[256];

        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
        curl_easy_cleanup(easy);
        c->easy = NULL;
        if (result == CURLE_COULDNT_CONNECT && mono_usec() < c->dial_until) {
                /* Nobody accepts yet: retry within the dial timeout, with
                 * gRPC's reconnect backoff (1 s, x1.6). */
                uint64_t left = c->dial_until - mono_usec();
                uint64_t d = c->retry_delay ? c->retry_delay : 1000000u;

                c->retry_delay = d * 16 / 10;
                loop_timer_arm(c->timer, d < left ? d : left);
                return;
        }
        if (c->too_large) {
                finish(c, GRPC_STATUS_INTERNAL, "reply larger than the limit", NULL, 0);
                return;
        }
        if (result == CURLE_OPERATION_TIMEDOUT) {
                finish(c, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded", NULL, 0);
                return;
        }
        if (result != CURLE_OK) {
                snprintf(msg, sizeof(msg), "transport: %s", curl_easy_strerror(result));
                finish(c, GRPC_STATUS_UNAVAILABLE, msg, NULL, 0);
                return;
        }
        if (http != 200) {
                snprintf(msg, sizeof(msg), "HTTP status %ld", http);
                finish(c, GRPC_STATUS_UNAVAILABLE, msg, NULL, 0);
                return;
        }
        if (c->grpc_status < 0) {
                finish(c, GRPC_STATUS_INTERNAL, "reply without grpc-status", NULL, 0);
                return;
        }
        if (c->grpc_status != GRPC_STATUS_OK) {
                finish(c, c->grpc_status, c->grpc_message ? c->grpc_message : "", NULL, 0);
                return;
        }
        {
                const uint8_t *m = NULL;
                const char *why = NULL;
                size_t mlen = 0;

                if (grpc_unframe((const uint8_t *)c->reply.data, c->reply.len, &m, &mlen, &why) < 0)
                        finish(c, GRPC_STATUS_INTERNAL, why, NULL, 0);
                else
                        finish(c, GRPC_STATUS_OK, "", m, mlen);
        }
}

static void start(struct grpc_call *c)
{
        CURL *e = curl_easy_init();

        buf_reset(&c->reply);
        c->grpc_status = -1;
        free(c->grpc_message);
        c->grpc_message = NULL;
        if (!e) {
                finish(c, GRPC_STATUS_INTERNAL, "out of memory", NULL, 0);
                return;
        }
        curl_easy_setopt(e, CURLOPT_URL, c->url);
        curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, c->socket_path);
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)c->body_len);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(c->deadline / 1000u));
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
        c->easy = e;
        if (curl_loop_add(c->cl, e, on_done, c) < 0) {
                c->easy = NULL;
                curl_easy_cleanup(e);
                finish(c, GRPC_STATUS_INTERNAL, "cannot start the call", NULL, 0);
        }
}

int grpc_call_start(struct loop *loop, struct curl_loop *cl, const struct grpc_call_config *cfg,
                    grpc_done_fn fn, void *data, struct grpc_call **ret_call)
{
        struct grpc_call *c = calloc(1, sizeof(*c));
        struct buf u = BUF_INIT, t = BUF_INIT;
        struct curl_slist *h = NULL;
        int r = -ENOMEM;

        if (!c)
                return -ENOMEM;
        c->loop = loop;
        buf_init(&c->reply);
        c->cl = cl;
        c->fn = fn;
        c->data = data;
        c->deadline = cfg->deadline_usec;
        c->dial_until = mono_usec() + cfg->dial_usec;
        c->socket_path = strdup(cfg->socket_path);
        buf_printf(&u, "http://localhost%s", cfg->method);
        c->url = buf_steal(&u, NULL);
        c->body_len = cfg->request_len + 5;
        c->body = malloc(c->body_len);
        if (!c->socket_path || !c->url || !c->body)
                goto fail;
        c->body[0] = 0;
        c->body[1] = (uint8_t)(cfg->request_len >> 24);
        c->body[2] = (uint8_t)(cfg->request_len >> 16);
        c->body[3] = (uint8_t)(cfg->request_len >> 8);
        c->body[4] = (uint8_t)cfg->request_len;
        if (cfg->request_len)
                memcpy(c->body + 5, cfg->request, cfg->request_len);
        buf_printf(&t, "grpc-timeout: %llum", (unsigned long long)(cfg->deadline_usec / 1000u));
        /* "Name:" with no value removes a header libcurl would add. */
        {
                const char *lines[] = {"content-type: application/grpc", "te: trailers", t.data,
                                       "Expect:", "Accept:"};

                for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
                        struct curl_slist *n = lines[i] ? curl_slist_append(h, lines[i]) : NULL;

                        if (!n)
                                goto fail;
                        h = n;
                }
        }
        c->hdrs = h;
        h = NULL;
        if ((r = loop_timer_new(loop, on_retry, c, &c->timer)) < 0)
                goto fail;
        buf_free(&t);
        if (ret_call)
                *ret_call = c;
        /* Started from the loop, so the callback never runs inside this
         * function. */
        loop_timer_arm(c->timer, 0);
        return 0;
fail:
        curl_slist_free_all(h);
        buf_free(&t);
        call_free(c);
        return r;
}
