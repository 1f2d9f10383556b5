/*
 * options — `podmux run` flags and the KubeletConfiguration file (see
 * src/cmd/options.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "sources/api_source.h"
#include "util/duration.h"
#include "events/event_recorder.h"
#include "util/file.h"
#include "util/log.h"
#include "metrics/metrics_server.h"
#include "cmd/options.h"
#include "util/path.h"
#include "util/str.h"
#include "stream/stream_server.h"
#include "kubeapi/kube_api_server.h"
#include "kubeapi/kube_view.h"
#include "util/yaml_json.h"

#define DEFAULT_CHECK_USEC (20u * 1000u * 1000u)

enum {
        OPT_NODE_NAME = 256,
        OPT_HOSTNAME_OVERRIDE,
        OPT_POD_MANIFEST_PATH,
        OPT_FILE_CHECK,
        OPT_MANIFEST_URL,
        OPT_MANIFEST_URL_HEADER,
        OPT_HTTP_CHECK,
        OPT_KUBECONFIG,
        OPT_IN_CLUSTER,
        OPT_PLUGINS_DIR,
        OPT_SOCKET,
        OPT_SOCKET_MODE,
        OPT_MODE,
        OPT_CONFIG,
        OPT_LOG_FORMAT,
        OPT_MAX_BACKLOG,
        OPT_MAX_CONSUMERS,
        OPT_HISTORY,
        OPT_HISTORY_BYTES,
        OPT_SOCKET_GROUP,
        OPT_ALLOW_UIDS,
        OPT_ALLOW_GIDS,
        OPT_METRICS_ADDRESS,
        OPT_EVENTS,
        OPT_EVENT_QPS,
        OPT_EVENT_BURST,
        OPT_CHECKPOINT_DIR,
        OPT_CHECKPOINT_INTERVAL,
        OPT_CHECKPOINT_GRACE,
        OPT_CHECKPOINT_MAX_AGE,
        OPT_RELIST_SPREAD,
        OPT_WATCH_LIST,
        OPT_FILE_PATTERN,
        OPT_KUBE_API_SOCKET,
        OPT_KUBE_API_HISTORY,
        OPT_KUBE_API_MIN_REQUEST_TIMEOUT,
        OPT_KUBE_API_ADDRESS,
        OPT_KUBE_API_TLS_CERT,
        OPT_KUBE_API_TLS_KEY,
        OPT_KUBE_API_CERT_DIR,
        OPT_KUBE_API_CLIENT_CA,
        OPT_KUBE_API_AUTHZ,
};

static const struct option long_opts[] = {
        {"node-name", required_argument, NULL, OPT_NODE_NAME},
        {"hostname-override", required_argument, NULL, OPT_HOSTNAME_OVERRIDE},
        {"pod-manifest-path", required_argument, NULL, OPT_POD_MANIFEST_PATH},
        {"file-check-frequency", required_argument, NULL, OPT_FILE_CHECK},
        {"manifest-url", required_argument, NULL, OPT_MANIFEST_URL},
        {"manifest-url-header", required_argument, NULL, OPT_MANIFEST_URL_HEADER},
        {"http-check-frequency", required_argument, NULL, OPT_HTTP_CHECK},
        {"static-pod-file-pattern", required_argument, NULL, OPT_FILE_PATTERN},
        {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
        {"in-cluster", no_argument, NULL, OPT_IN_CLUSTER},
        {"plugins-registry-dir", required_argument, NULL, OPT_PLUGINS_DIR},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"socket-mode", required_argument, NULL, OPT_SOCKET_MODE},
        {"mode", required_argument, NULL, OPT_MODE},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"v", required_argument, NULL, 'v'},
        {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
        {"max-consumer-backlog", required_argument, NULL, OPT_MAX_BACKLOG},
        {"max-consumers", required_argument, NULL, OPT_MAX_CONSUMERS},
        {"history", required_argument, NULL, OPT_HISTORY},
        {"history-bytes", required_argument, NULL, OPT_HISTORY_BYTES},
        {"socket-group", required_argument, NULL, OPT_SOCKET_GROUP},
        {"allow-uids", required_argument, NULL, OPT_ALLOW_UIDS},
        {"allow-gids", required_argument, NULL, OPT_ALLOW_GIDS},
        {"metrics-address", required_argument, NULL, OPT_METRICS_ADDRESS},
        {"events", optional_argument, NULL, OPT_EVENTS},
        {"event-qps", required_argument, NULL, OPT_EVENT_QPS},
        {"event-burst", required_argument, NULL, OPT_EVENT_BURST},
        {"checkpoint-dir", required_argument, NULL, OPT_CHECKPOINT_DIR},
        {"checkpoint-interval", required_argument, NULL, OPT_CHECKPOINT_INTERVAL},
        {"checkpoint-grace", required_argument, NULL, OPT_CHECKPOINT_GRACE},
        {"checkpoint-max-age", required_argument, NULL, OPT_CHECKPOINT_MAX_AGE},
        {"kube-api-socket", required_argument, NULL, OPT_KUBE_API_SOCKET},
        {"kube-api-history", required_argument, NULL, OPT_KUBE_API_HISTORY},
        {"kube-api-min-request-timeout", required_argument, NULL, OPT_KUBE_API_MIN_REQUEST_TIMEOUT},
        {"kube-api-address", required_argument, NULL, OPT_KUBE_API_ADDRESS},
        {"kube-api-tls-cert-file", required_argument, NULL, OPT_KUBE_API_TLS_CERT},
        {"kube-api-tls-private-key-file", required_argument, NULL, OPT_KUBE_API_TLS_KEY},
        {"kube-api-cert-dir", required_argument, NULL, OPT_KUBE_API_CERT_DIR},
        {"kube-api-client-ca-file", required_argument, NULL, OPT_KUBE_API_CLIENT_CA},
        {"kube-api-authorization-mode", required_argument, NULL, OPT_KUBE_API_AUTHZ},
        {"relist-spread", required_argument, NULL, OPT_RELIST_SPREAD},
        {"watch-list", no_argument, NULL, OPT_WATCH_LIST},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

const struct option *options_flags(void)
{
        return long_opts;
}

const char *options_usage(void)
{
        return "Usage: podmux run [FLAGS]\n"
               "\n"
               "Sources (each is enabled by its flag):\n"
               "  --pod-manifest-path PATH      static pod directory or file; a relative path is taken from\n"
               "                                the working directory (no default: off)\n"
               "  --file-check-frequency DUR    relist period of the static pod path (default 20s)\n"
               "  --static-pod-file-pattern GLOB  in the static pod directory, read only names matching\n"
               "                                this fnmatch(3) glob (repeatable: any of them; names starting\n"
               "                                with '.' are never read; default: off, every other name, as\n"
               "                                the kubelet); no KubeletConfiguration field sets it\n"
               "  --manifest-url URL            HTTP manifest URL (no default: off)\n"
               "  --manifest-url-header 'k:v,k:v'  headers for the manifest URL (repeatable)\n"
               "  --http-check-frequency DUR    poll period of the manifest URL (default 20s)\n"
               "  --kubeconfig FILE             API server source from a kubeconfig (no default: off)\n"
               "  --in-cluster                  API server source from the service account (default off)\n"
               "  --relist-spread DUR           a list after a 410 waits a random part of DUR, so that a fleet\n"
               "                                does not list at once, and at most 3 then one per 5 DUR;\n"
               "                                0 for neither (default 1m)\n"
               "  --watch-list                  list as a streaming list (a watch with sendInitialEvents); a\n"
               "                                server that refuses it is listed and watched (default off)\n"
               "  --plugins-registry-dir DIR    plugin registry directory; \"\" turns it off (default: off; as root\n"
               "                                when no source is configured, i.e. without --pod-manifest-path,\n"
               "                                nor --manifest-url, --kubeconfig, --in-cluster or --config:\n"
               "                                " OPTIONS_DEFAULT_PLUGINS_DIR ")\n"
               "  --config FILE                 KubeletConfiguration YAML: staticPodPath, staticPodURL,\n"
               "                                staticPodURLHeader, fileCheckFrequency, httpCheckFrequency\n"
               "                                (flags given on the command line win; a relative staticPodPath\n"
               "                                is taken from the file's directory; default: none)\n"
               "\n"
               "Checkpoint of the API source's pods, for nodes that lose their API server (doc/checkpoint.md):\n"
               "  --checkpoint-dir DIR          keep the API source's last good pods in DIR and serve them at\n"
               "                                start while the API server cannot be reached; DIR must be owned\n"
               "                                by podmux's user, not writable by group or others (default: off)\n"
               "  --checkpoint-interval DUR     at most one checkpoint write per DUR (default 1m)\n"
               "  --checkpoint-grace DUR        serve the checkpoint when the server has not answered (a list,\n"
               "                                or a resumed watch confirmed) within DUR, or at once when it\n"
               "                                refuses or is unreachable (default 10s)\n"
               "  --checkpoint-max-age DUR      refuse a checkpoint older than DUR (default 168h)\n"
               "\n"
               "Node and stream:\n"
               "  --node-name NAME              node name, as given (default: the host name, lower-cased)\n"
               "  --hostname-override NAME      node name, trimmed and lower-cased as the kubelet takes it;\n"
               "                                not with a different --node-name (default: the host name)\n"
               "  --socket PATH                 update stream socket (default " OPTIONS_DEFAULT_SOCKET ",\n"
               "                                or $PODMUX_SOCKET)\n"
               "  --socket-mode MODE            socket file mode, octal (default 0660)\n"
               "  --socket-group GROUP          group of the socket file, a name or a number (default: the daemon's)\n"
               "  --allow-uids UID,...          only these users (and root, and the daemon's user) may connect,\n"
               "                                checked with SO_PEERCRED (default: anyone the socket mode lets in)\n"
               "  --allow-gids GID,...          also users whose primary group is listed (default: none)\n"
               "  --mode MODE                   incremental | snapshot | snapshot-and-updates (default incremental)\n"
               "  --max-consumers N             consumers at once (default 1024)\n"
               "  --max-consumer-backlog BYTES  unsent bytes before a consumer is cut off (default 67108864)\n"
               "  --history N                   messages kept for resume_after (default 4096)\n"
               "  --history-bytes BYTES         and at most this much text, as a replay would send it; pods\n"
               "                                are kept by reference, so it holds far less (default 16777216)\n"
               "\n"
               "Observability:\n"
               "  --metrics-address ADDR        Prometheus metrics at GET /metrics on a unix socket (/path or\n"
               "                                unix:/path, mode and group as --socket-mode/--socket-group) or a\n"
               "                                loopback port (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)\n"
               "                                (default: off)\n"
               "\n"
               "The pods through the Kubernetes API, read-only (doc/kube-api.md):\n"
               "  --kube-api-socket PATH        serve GET /api/v1/pods (list, get, watch) and discovery on this\n"
               "                                unix socket, mode, group and allow lists as --socket's\n"
               "                                (default: off)\n"
               "  --kube-api-history N          watch events kept to replay from a resourceVersion,\n"
               "                                at most 1000000 (default 10000)\n"
               "  --kube-api-min-request-timeout DUR  a watch without timeoutSeconds ends after a random\n"
               "                                time between DUR and twice DUR (default 30m)\n"
               "  --kube-api-address HOST:PORT  serve the same over TCP, always TLS (default: off)\n"
               "  --kube-api-tls-cert-file FILE  its certificate (PEM), with --kube-api-tls-private-key-file\n"
               "                                (default: a self-signed pair in the cert dir)\n"
               "  --kube-api-tls-private-key-file FILE  its key (PEM) (default: the self-signed pair's)\n"
               "  --kube-api-cert-dir DIR       where the self-signed pair is made and kept\n"
               "                                (default " OPTIONS_DEFAULT_KUBE_API_CERT_DIR ")\n"
               "  --kube-api-client-ca-file FILE  clients of the address may show a certificate of this CA;\n"
               "                                anonymous requests get 401 (default: none: bearer tokens\n"
               "                                only, verified by TokenReview, which needs --kubeconfig\n"
               "                                or --in-cluster)\n"
               "  --kube-api-authorization-mode MODE  AlwaysAllow (any authenticated client) or Webhook\n"
               "                                (SubjectAccessReview; needs --kubeconfig or --in-cluster)\n"
               "                                (default Webhook)\n"
               "\n"
               "Events (with --kubeconfig or --in-cluster; doc/events.md):\n"
               "  --events BOOL                 record Kubernetes Events on the API server: a duplicate pod\n"
               "                                name, a rejected static pod or manifest URL; give the value\n"
               "                                with '=', as in --events=false (default true)\n"
               "  --event-qps N                 event writes per second, 0 for no limit (default 50;\n"
               "                                eventRecordQPS in --config)\n"
               "  --event-burst N               writes allowed at once before --event-qps applies; 0 means\n"
               "                                client-go's 10 (default 100; eventBurst in --config)\n"
               "\n"
               "Logging:\n"
               "  -v, --v N                     verbosity: 0 info (default), 1-3 debug, 4+ trace\n"
               "  --log-format text|json        log line format (default text)\n"
               "  -h, --help                    this help\n"
               "\n"
               "Durations are Go-style: 20s, 1m30s, 500ms.  Flags that contradict each other are\n"
               "refused before anything is created (exit 2): --kubeconfig with --in-cluster,\n"
               "--node-name with a different --hostname-override, and paths that collide: the\n"
               "socket, the metrics socket, the kube-api socket, their .lock files, the static\n"
               "pod path and the plugin registry must each be apart (a socket in the static pod\n"
               "directory would be read as a manifest, one under the registry taken for a plugin).\n";
}

void options_free(struct options *o)
{
        if (!o)
                return;
        free(o->node_name);
        free(o->pod_manifest_path);
        free(o->manifest_url);
        for (size_t i = 0; i < o->n_headers; i++) {
                free(o->headers[i].name);
                free(o->headers[i].value);
        }
        free(o->headers);
        for (size_t i = 0; i < o->n_file_patterns; i++)
                free(o->file_patterns[i]);
        free(o->file_patterns);
        free(o->kubeconfig);
        free(o->plugins_dir);
        free(o->socket_path);
        free(o->config_file);
        free(o->config_unknown);
        free(o->allow_uids);
        free(o->allow_gids);
        free(o->metrics_address);
        free(o->kube_api_socket);
        free(o->kube_api_address);
        free(o->kube_api_tls_cert);
        free(o->kube_api_tls_key);
        free(o->kube_api_cert_dir);
        free(o->kube_api_client_ca);
        free(o->checkpoint_dir);
        memset(o, 0, sizeof(*o));
}

/* A host name as the kubelet takes it (nodeutil.GetHostname): white space
 * trimmed, lower-cased, in place.  ASCII only: a node name with other
 * letters is refused by the API server anyway. */
static void node_name_normalize(char *s)
{
        size_t start = 0, end = strlen(s);

        while (start < end && strchr(" \t\n\v\f\r", s[start]))
                start++;
        while (end > start && strchr(" \t\n\v\f\r", s[end - 1]))
                end--;
        memmove(s, s + start, end - start);
        s[end - start] = '\0';
        for (; *s; s++)
                if (*s >= 'A' && *s <= 'Z')
                        *s = (char)(*s - 'A' + 'a');
}

int options_default_node_name(char *out, size_t size)
{
        if (gethostname(out, size) < 0)
                return -errno;
        out[size - 1] = '\0';
        node_name_normalize(out);
        return out[0] ? 0 : -ENOENT;
}

static int parse_size(const char *flag, const char *v, size_t min, size_t *ret, struct buf *err)
{
        char *end;
        unsigned long long n;

        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || n < min) {
                return buf_set_err(err, -EINVAL, "--%s: invalid value \"%s\" (a whole number >= %zu)", flag, v, min);
        }
        *ret = (size_t)n;
        return 0;
}

static int parse_duration_flag(const char *flag, const char *v, uint64_t *ret, struct buf *err)
{
        uint64_t us;

        if (duration_parse(v, &us) < 0 || us == 0) {
                return buf_set_err(err, -EINVAL,
                                   "--%s: invalid duration \"%s\" (use Go syntax like 20s or 1m30s, greater than 0)",
                                   flag, v);
        }
        *ret = us;
        return 0;
}

static int add_header(struct options *o, const char *name, size_t nlen, const char *value,
                      size_t vlen)
{
        struct http_header *n = realloc(o->headers, (o->n_headers + 1) * sizeof(*n));

        if (!n)
                return -ENOMEM;
        o->headers = n;
        n[o->n_headers].name = strndup(name, nlen);
        n[o->n_headers].value = strndup(value, vlen);
        if (!n[o->n_headers].name || !n[o->n_headers].value) {
                free(n[o->n_headers].name);
                free(n[o->n_headers].value);
                return -ENOMEM;
        }
        o->n_headers++;
        return 0;
}

int options_add_headers(struct options *o, const char *spec, struct buf *err)
{
        const char *p = spec;

        /* The kubelet's form: "key:value,key:value"; a repeated key adds
         * another value. */
        while (*p) {
                const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
                const char *colon = memchr(p, ':', (size_t)(end - p));

                if (!colon || colon == p) {
                        return buf_set_err(err, -EINVAL,
                                           "--manifest-url-header: invalid entry \"%.*s\" (want key:value)",
                                           (int)(end - p), p);
                }
                if (add_header(o, p, (size_t)(colon - p), colon + 1, (size_t)(end - colon - 1)) < 0)
                        return -ENOMEM;
                p = comma ? comma + 1 : end;
        }
        return 0;
}

_Static_assert(sizeof(uid_t) == sizeof(unsigned) && sizeof(gid_t) == sizeof(unsigned),
               "ids are parsed as unsigned int");

/* "1000,1001" into a list of ids (uid_t and gid_t are both unsigned int
 * here).  Names are not looked up: ids are what SO_PEERCRED reports. */
int options_add_pattern(char ***patterns, size_t *n, const char *v, struct buf *err)
{
        char **more, *copy;

        if (!v[0])
                return buf_set_err(err, -EINVAL, "--static-pod-file-pattern: must not be empty");
        if (strchr(v, '/'))
                return buf_set_err(err, -EINVAL,
                                   "--static-pod-file-pattern \"%s\": it is matched against a file's name, which "
                                   "holds no '/'",
                                   v);
        if (strlen(v) > OPTIONS_MAX_PATTERN_LEN)
                return buf_set_err(err, -EINVAL, "--static-pod-file-pattern: longer than %d bytes",
                                   OPTIONS_MAX_PATTERN_LEN);
        if (*n >= OPTIONS_MAX_PATTERNS)
                return buf_set_err(err, -EINVAL, "--static-pod-file-pattern: at most %d patterns",
                                   OPTIONS_MAX_PATTERNS);
        if (!(copy = strdup(v)))
                return -ENOMEM;
        more = realloc(*patterns, (*n + 1) * sizeof(*more));
        if (!more) {
                free(copy);
                return -ENOMEM;
        }
        more[(*n)++] = copy;
        *patterns = more;
        return 0;
}

static int parse_ids(const char *flag, const char *v, unsigned **ret, size_t *ret_n, struct buf *err)
{
        unsigned *ids = NULL, *tmp;
        size_t n = 0;
        const char *p = v;

        while (*p) {
                char *end;
                unsigned long id;

                errno = 0;
                id = strtoul(p, &end, 10);
                if (errno || end == p || (*end && *end != ',') || id > 0xfffffffeul || *p == '-') {
                        free(ids);
                        return buf_set_err(err, -EINVAL, "--%s: invalid id list \"%s\" (numbers separated by commas)",
                                           flag, v);
                }
                tmp = realloc(ids, (n + 1) * sizeof(*ids));
                if (!tmp) {
                        free(ids);
                        return -ENOMEM;
                }
                ids = tmp;
                ids[n++] = (unsigned)id;
                p = *end ? end + 1 : end;
        }
        if (n == 0) {
                return buf_set_err(err, -EINVAL, "--%s: empty id list", flag);
        }
        free(*ret);
        *ret = ids;
        *ret_n = n;
        return 0;
}

static int parse_group(const char *v, gid_t *ret, struct buf *err)
{
        struct group gr, *res = NULL;
        char scratch[4096], *end;
        unsigned long id;

        errno = 0;
        id = strtoul(v, &end, 10);
        if (!errno && end != v && !*end && v[0] != '-' && id <= 0xfffffffeul) {
                *ret = (gid_t)id;
                return 0;
        }
        if (getgrnam_r(v, &gr, scratch, sizeof(scratch), &res) != 0 || !res) {
                return buf_set_err(err, -EINVAL, "--socket-group: no group named \"%s\"", v);
        }
        *ret = gr.gr_gid;
        return 0;
}

/* v as a whole number in base, from 0 to max: true and *ret. */
static bool parse_bounded(const char *v, int base, long max, long *ret)
{
        char *end;
        long n;

        errno = 0;
        n = strtol(v, &end, base);
        if (errno || end == v || *end || n < 0 || n > max)
                return false;
        *ret = n;
        return true;
}

/* --socket-mode: octal, at most 0777. */
static int parse_socket_mode(const char *v, mode_t *ret, struct buf *err)
{
        long n;

        if (!parse_bounded(v, 8, 0777, &n))
                return buf_set_err(err, -EINVAL, "--socket-mode: invalid mode \"%s\" (octal, e.g. 0660)", v);
        *ret = (mode_t)n;
        return 0;
}

/* -v: a verbosity from 0 to 10. */
static int parse_verbosity(const char *v, int *ret, struct buf *err)
{
        long n;

        if (!parse_bounded(v, 10, 10, &n))
                return buf_set_err(err, -EINVAL, "-v: invalid verbosity \"%s\" (0 to 10)", v);
        *ret = (int)n;
        return 0;
}

/* --log-format: text (0) or json (1). */
static int parse_log_format(const char *v, int *ret, struct buf *err)
{
        enum log_format f;

        if (log_format_from_string(v, &f) < 0)
                return buf_set_err(err, -EINVAL, "--log-format: unknown format \"%s\" (text or json)", v);
        *ret = f == LOG_FORMAT_JSON;
        return 0;
}

/* --mode: a storage mode by its name. */
static int parse_mode(const char *v, enum storage_mode *ret, struct buf *err)
{
        if (storage_mode_from_string(v, ret) < 0)
                return buf_set_err(err, -EINVAL,
                                   "--mode: unknown mode \"%s\" (incremental, snapshot or snapshot-and-updates)", v);
        return 0;
}

/* --metrics-address: kept in *slot once metrics_address_check() takes
 * it. */
static int parse_metrics_address(const char *v, char **slot, struct buf *err)
{
        struct buf why = BUF_INIT;
        int r;

        r = metrics_address_check(v, &why);
        if (r == -EINVAL)
                r = buf_set_err(err, r, "--metrics-address: %s", why.len ? why.data : "invalid");
        else if (r == 0)
                r = str_set(slot, v);
        buf_free(&why);
        return r;
}

/* ---- events (doc/events.md) -------------------------------------------------- */

/* --events: a Go boolean flag's value (strconv.ParseBool); --events alone
 * is true.  "--events false" is not "--events=false": the value must be
 * joined, as with Go's flags. */
static int parse_events(const char *v, bool *ret, struct buf *err)
{
        static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
        static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (!v || strcmp(v, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcmp(v, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return buf_set_err(err, -EINVAL, "--events: invalid value \"%s\" (true or false)", v);
}

/* --event-qps, --event-burst: the kubelet's int32, not negative. */
static int parse_event_count(const char *flag, const char *v, unsigned *ret, struct buf *err)
{
        long n;

        if (!parse_bounded(v, 10, INT32_MAX, &n))
                return buf_set_err(err, -EINVAL, "--%s: invalid value \"%s\" (a whole number from 0 to %ld)", flag, v,
                                   (long)INT32_MAX);
        *ret = (unsigned)n;
        return 0;
}

/* eventRecordQPS and eventBurst of the --config file (cfg), unless their
 * flags were given (qps_set, burst_set).  null is absent, as in the
 * kubelet. */
static int config_events(struct options *o, json_object *cfg, bool qps_set, bool burst_set, struct buf *err)
{
        const struct {
                const char *key;
                bool flagged;
                unsigned *slot;
        } f[] = {{"eventRecordQPS", qps_set, &o->event_qps}, {"eventBurst", burst_set, &o->event_burst}};

        for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
                json_object *v;
                int64_t n;

                if (f[i].flagged || !json_object_object_get_ex(cfg, f[i].key, &v) || !v)
                        continue;
                n = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
                if (n < 0 || n > INT32_MAX)
                        return buf_set_err(err, -EINVAL, "--config \"%s\": %s must be a whole number from 0 to %ld",
                                           o->config_file, f[i].key, (long)INT32_MAX);
                *f[i].slot = (unsigned)n;
        }
        return 0;
}

/* The flags a --config value must not override (load_config() keeps
 * what they set), and the node name as each of its flags gave it. */
struct flag_set {
        bool path, file_check, url, headers, http_check, plugins_dir;
        bool event_qps, event_burst;
        /* The last value of each spelling of the node name, to refuse
         * the two when they disagree: --node-name as typed (a pointer
         * into argv), --hostname-override as the kubelet takes it
         * (trimmed and lower-cased; options_parse() frees it). */
        const char *node_name;
        char *hostname_override;
        /* The first checkpoint duration flag given (NULL: none), for
         * the check that --checkpoint-dir is there too. */
        const char *checkpoint_tuning;
};

/* Reads the --config file: a YAML mapping of kind KubeletConfiguration.
 * 0 with *ret_cfg for the caller to put, or an error naming the file. */
static int config_read(const char *path, json_object **ret_cfg, struct buf *err)
{
        char *data = NULL;
        size_t len = 0;
        json_object *cfg = NULL, *v;
        struct buf e = BUF_INIT;
        int r;

        r = file_read(path, OPTIONS_CONFIG_MAX_BYTES, &data, &len, &e);
        if (r == 0)
                r = yaml_to_json(data, len, &cfg, &e);
        if (r == 0 && !json_object_is_type(cfg, json_type_object)) {
                buf_puts(&e, "not a mapping");
                r = -EINVAL;
        }
        /* kind: null decodes to a NULL object: check the type first. */
        if (r == 0 && (!json_object_object_get_ex(cfg, "kind", &v) || !json_object_is_type(v, json_type_string) ||
                       strcmp(json_object_get_string(v), "KubeletConfiguration") != 0)) {
                buf_puts(&e, "kind must be KubeletConfiguration");
                r = -EINVAL;
        }
        if (r < 0) {
                r = buf_set_err(err, r, "--config \"%s\": %s", path, e.len ? e.data : "invalid");
                json_object_put(cfg);
        } else {
                *ret_cfg = cfg;
        }
        free(data);
        buf_free(&e);
        return r;
}

/* staticPodURLHeader (v): a map of header name to a list of values,
 * each added to o->headers. */
static int config_headers(struct options *o, json_object *v, struct buf *err)
{
        int r;

        if (!json_object_is_type(v, json_type_object)) {
                return buf_set_err(err, -EINVAL,
                                   "--config \"%s\": staticPodURLHeader must be a map of name to list of values",
                                   o->config_file);
        }
        json_object_object_foreach(v, name, vals) {
                size_t n = json_object_is_type(vals, json_type_array) ? json_object_array_length(vals) : 0;

                if (!json_object_is_type(vals, json_type_array)) {
                        return buf_set_err(err, -EINVAL, "--config \"%s\": staticPodURLHeader.%s must be a list",
                                           o->config_file, name);
                }
                for (size_t i = 0; i < n; i++) {
                        json_object *s = json_object_array_get_idx(vals, i);

                        /* []string, as the kubelet decodes it: a
                         * null (a NULL object) or a number is an
                         * error, not a value. */
                        if (!json_object_is_type(s, json_type_string)) {
                                return buf_set_err(err, -EINVAL,
                                                   "--config \"%s\": staticPodURLHeader.%s must be a list of strings",
                                                   o->config_file, name);
                        }
                        if ((r = add_header(o, name, strlen(name), json_object_get_string(s),
                                            (size_t)json_object_get_string_len(s))) < 0)
                                return r;
                }
        }
        return 0;
}

/*
 * The top-level fields of KubeletConfiguration (kubelet.config.k8s.io/
 * v1beta1, k8s.io/kubelet/config/v1beta1), with kind and apiVersion, each
 * between spaces: a field podmux does not read is ignored silently, as it
 * is meant for the kubelet; one that no kubelet knows is a mistake worth
 * a warning (the kubelet's strict decoding warns, then goes on).
 */
static const char kubelet_config_fields[] =
        " address allowedUnsafeSysctls apiVersion authentication authorization cgroupDriver cgroupRoot "
        " cgroupsPerQOS clusterDNS clusterDomain configMapAndSecretChangeDetectionStrategy "
        " containerLogMaxFiles containerLogMaxSize containerLogMaxWorkers containerLogMonitorInterval "
        " containerRuntimeEndpoint contentType cpuCFSQuota cpuCFSQuotaPeriod cpuManagerPolicy "
        " cpuManagerPolicyOptions cpuManagerReconcilePeriod crashLoopBackOff draManagerReconcilePeriod "
        " enableContentionProfiling enableControllerAttachDetach enableDebugFlagsHandler "
        " enableDebuggingHandlers enableProfilingHandler enableServer enableSystemLogHandler "
        " enableSystemLogQuery enforceNodeAllocatable eventBurst eventRecordQPS evictionHard "
        " evictionMaxPodGracePeriod evictionMinimumReclaim evictionPressureTransitionPeriod evictionSoft "
        " evictionSoftGracePeriod failCgroupV1 failSwapOn featureGates fileCheckFrequency hairpinMode "
        " healthzBindAddress healthzPort httpCheckFrequency imageGCHighThresholdPercent "
        " imageGCLowThresholdPercent imageMaximumGCAge imageMinimumGCAge "
        " imagePullCredentialsVerificationPolicy imageServiceEndpoint iptablesDropBit iptablesMasqueradeBit "
        " kernelMemcgNotification kind kubeAPIBurst kubeAPIQPS kubeReserved kubeReservedCgroup "
        " kubeletCgroups localStorageCapacityIsolation logging makeIPTablesUtilChains maxOpenFiles "
        " maxParallelImagePulls maxPods memoryManagerPolicy memoryReservationPolicy memorySwap "
        " memoryThrottlingFactor mergeDefaultEvictionSettings nodeLeaseDurationSeconds nodeStatusMaxImages "
        " nodeStatusReportFrequency nodeStatusUpdateFrequency oomScoreAdj podCIDR podLogsDir podPidsLimit "
        " podsPerCore port preloadedImagesVerificationAllowlist protectKernelDefaults providerID qosReserved "
        " readOnlyPort registerNode registerWithTaints registryBurst registryPullQPS reservedMemory "
        " reservedSystemCPUs resolvConf rotateCertificates runOnce runtimeRequestTimeout seccompDefault "
        " serializeImagePulls serverTLSBootstrap showHiddenMetricsForVersion shutdownGracePeriod "
        " shutdownGracePeriodByPodPriority shutdownGracePeriodCriticalPods singleProcessOOMKill "
        " staticPodPath staticPodURL staticPodURLHeader streamingConnectionIdleTimeout syncFrequency "
        " systemCgroups systemReserved systemReservedCgroup tlsCertFile tlsCipherSuites tlsCurvePreferences "
        " tlsMinVersion tlsPrivateKeyFile topologyManagerPolicy topologyManagerPolicyOptions "
        " topologyManagerScope tracing userNamespaces volumePluginDir volumeStatsAggPeriod ";

#define CONFIG_UNKNOWN_LISTED 20 /* names listed at most; the rest counted */

/* Whether key is one of kubelet_config_fields.  O(the list's 3 KB), for
 * the few keys of a configuration file. */
static bool kubelet_config_field(const char *key)
{
        size_t n = strlen(key);

        if (n == 0 || strchr(key, ' '))
                return false;
        for (const char *p = strstr(kubelet_config_fields, key); p; p = strstr(p + 1, key))
                if (p[-1] == ' ' && p[n] == ' ')
                        return true;
        return false;
}

/* The top-level fields of cfg that KubeletConfiguration does not define,
 * as o->config_unknown (NULL for none).  Nested fields are not checked.
 * 0 or -ENOMEM. */
static int config_unknown_fields(struct options *o, json_object *cfg)
{
        struct buf list = BUF_INIT;
        size_t n = 0;
        int r = 0;

        json_object_object_foreach(cfg, key, val) {
                (void)val;
                if (kubelet_config_field(key))
                        continue;
                if (++n > CONFIG_UNKNOWN_LISTED)
                        continue;
                if ((n > 1 && (r = buf_puts(&list, ", ")) < 0) || (r = buf_json_string(&list, key, strlen(key))) < 0)
                        goto out;
        }
        if (n > CONFIG_UNKNOWN_LISTED && (r = buf_printf(&list, " (and %zu more)", n - CONFIG_UNKNOWN_LISTED)) < 0)
                goto out;
        free(o->config_unknown);
        o->config_unknown = n ? buf_steal(&list, NULL) : NULL;
        if (n && !o->config_unknown)
                r = -ENOMEM;
out:
        buf_free(&list);
        return r < 0 ? -ENOMEM : 0;
}

/* *slot, a path read from the --config file: a relative one is taken
 * from the file's directory, as the kubelet resolves the paths of its
 * configuration file, not from the working directory (joined here to the
 * directory as the file was named; absolute_manifest_path() does the
 * rest).  0 or -ENOMEM. */
static int config_path(const struct options *o, char **slot)
{
        const char *slash = strrchr(o->config_file, '/');
        char *dir, *joined;

        if (!*slot || (*slot)[0] == '/' || !slash)
                return 0;
        dir = slash == o->config_file ? strdup("/") : strndup(o->config_file, (size_t)(slash - o->config_file));
        joined = dir ? path_join(dir, *slot) : NULL;
        free(dir);
        if (!joined)
                return -ENOMEM;
        free(*slot);
        *slot = joined;
        return 0;
}

/* Reads the KubeletConfiguration fields podmux honours.  Values already
 * set by flags (set marks them) are kept. */
static int load_config(struct options *o, const struct flag_set *set, struct buf *err)
{
        json_object *cfg = NULL, *v;
        int r;

        if ((r = config_read(o->config_file, &cfg, err)) < 0)
                return r;
        if ((r = config_unknown_fields(o, cfg)) < 0)
                goto out;
#define CFG_STRING(key, slot, flagged)                                              \
        if (!(flagged) && json_object_object_get_ex(cfg, key, &v) &&                   \
            json_object_is_type(v, json_type_string) && json_object_get_string_len(v)) { \
                if ((r = str_set(&(slot), json_object_get_string(v))) < 0)              \
                        goto out;                                                       \
        }
#define CFG_DURATION(key, slot, flagged)                                                                               \
        if (!(flagged) && json_object_object_get_ex(cfg, key, &v)) {                                                   \
                uint64_t us;                                                                                           \
                if (!json_object_is_type(v, json_type_string) || duration_parse(json_object_get_string(v), &us) < 0 || \
                    us == 0) {                                                                                         \
                        const char *t_ = json_object_to_json_string_ext(v, JSON_C_TO_STRING_NOSLASHESCAPE);            \
                        r = t_ ? buf_set_err(err, -EINVAL, "--config \"%s\": %s: invalid duration %s", o->config_file, \
                                             key, t_)                                                                  \
                               : (buf_reset(err), -ENOMEM);                                                            \
                        goto out;                                                                                      \
                }                                                                                                      \
                slot = us;                                                                                             \
        }
        CFG_STRING("staticPodPath", o->pod_manifest_path, set->path);
        if (!set->path && (r = config_path(o, &o->pod_manifest_path)) < 0)
                goto out;
        CFG_STRING("staticPodURL", o->manifest_url, set->url);
        CFG_DURATION("fileCheckFrequency", o->file_check_usec, set->file_check);
        CFG_DURATION("httpCheckFrequency", o->http_check_usec, set->http_check);
#undef CFG_STRING
#undef CFG_DURATION
        if (!set->headers && json_object_object_get_ex(cfg, "staticPodURLHeader", &v) &&
            (r = config_headers(o, v, err)) < 0)
                goto out;
        if ((r = config_events(o, cfg, set->event_qps, set->event_burst, err)) < 0)
                goto out;
        r = 0;
out:
        json_object_put(cfg);
        return r;
}

static void drop_empty(char **slot)
{
        if (*slot && !(*slot)[0]) {
                free(*slot);
                *slot = NULL;
        }
}

bool options_default_plugins(const struct options *o, uid_t euid)
{
        /* The kubelet always runs its plugin manager under its root
         * directory.  podmux does so only as root, and only when the
         * command line describes no source: a run that names its own
         * sources (a trial, a test, a demo) does not create or watch
         * /var/lib/kubelet unless --plugins-registry-dir asks for it. */
        return euid == 0 && !o->explicit_sources;
}

/* A path made absolute against the working directory, then cleaned
 * lexically (src/util/path.h), so two spellings of one file compare
 * equal; only cleaned when the working directory is unknown.  NULL on
 * ENOMEM. */
static char *abs_clean(const char *p)
{
        char *abs = NULL;
        int r = path_absolute(p, NULL, &abs);

        if (r == -ENOMEM)
                return NULL;
        return r < 0 ? path_clean(p) : abs;
}

/* path + ".lock": the lock file beside a socket (src/util/unix_listen.c).
 * NULL on ENOMEM. */
static char *lock_of(const char *path)
{
        size_t n = strlen(path);
        char *l = malloc(n + sizeof(".lock"));

        if (l) {
                memcpy(l, path, n);
                memcpy(l + n, ".lock", sizeof(".lock"));
        }
        return l;
}

/* Whether path is dir itself or below it. */
static bool is_under(const char *path, const char *dir, bool or_equal)
{
        size_t n = strlen(dir);

        if (strcmp(dir, "/") == 0)
                return path[1] != '\0' || or_equal;
        if (strncmp(path, dir, n) != 0)
                return false;
        return path[n] == '/' || (or_equal && path[n] == '\0');
}

/* Whether the plugin manager would look at a socket at path below dir:
 * it walks every depth but skips names that start with '.'
 * (src/plugins/plugin_manager.c). */
static bool seen_by_plugin_manager(const char *path, const char *dir)
{
        const char *p;

        if (!is_under(path, dir, false))
                return false;
        p = path + (strcmp(dir, "/") == 0 ? 0 : strlen(dir));
        for (; *p; p++)
                if (p[0] == '/' && p[1] == '.')
                        return false;
        return true;
}

/* Whether the file source would list path: a file in the directory dir
 * (no recursion, names starting with '.' skipped), or dir itself when it
 * is a single manifest file.  Lexical: dir may not exist yet. */
static bool seen_by_file_source(const char *path, const char *dir)
{
        const char *slash = strrchr(path, '/');

        if (strcmp(path, dir) == 0)
                return true;
        if (!slash || slash[1] == '.')
                return false;
        if (slash == path)
                return strcmp(dir, "/") == 0;
        return strlen(dir) == (size_t)(slash - path) && strncmp(path, dir, (size_t)(slash - path)) == 0;
}

/* The unix socket of a --metrics-address ("/path" or "unix:/path", see
 * src/metrics/metrics_server.h), or NULL for a TCP address. */
static const char *metrics_unix_path(const char *address)
{
        if (address[0] == '/')
                return address;
        if (strncmp(address, "unix:", 5) == 0)
                return address + 5;
        return NULL;
}

enum { P_SOCKET, P_METRICS, P_MANIFESTS, P_REGISTRY, P_N };

/*
 * Flags that contradict each other, found before anything is created:
 * the caller exits 2.  Each pair is named by the flags (or the --config
 * field) that set it.  0, -EINVAL with a message, or -ENOMEM.
 */
static int check_conflicts(const struct options *o, const struct flag_set *set, struct buf *err)
{
        const char *names[P_N] = {
                "--socket", "--metrics-address",
                set->path ? "--pod-manifest-path" : "staticPodPath (--config)",
                set->plugins_dir ? "--plugins-registry-dir" : "--plugins-registry-dir (its default, as root)",
        };
        const char *given[P_N] = {
                o->socket_path,
                o->metrics_address ? metrics_unix_path(o->metrics_address) : NULL,
                o->pod_manifest_path,
                o->plugins_dir && o->plugins_dir[0] ? o->plugins_dir : NULL,
        };
        char *abs[P_N] = {NULL}, *lock[2] = {NULL};
        int r = -ENOMEM;

        if (o->kubeconfig && o->in_cluster) {
                return buf_set_err(err, -EINVAL,
                                   "--kubeconfig and --in-cluster both configure the API server source: give one");
        }
        if (set->node_name && set->hostname_override && strcmp(set->node_name, set->hostname_override) != 0) {
                return buf_set_err(err, -EINVAL,
                                   "--node-name \"%s\" and --hostname-override \"%s\" name different nodes: give one",
                                   set->node_name, set->hostname_override);
        }
        for (int i = 0; i < P_N; i++)
                if (given[i] && !(abs[i] = abs_clean(given[i])))
                        goto out;
        for (int i = P_SOCKET; i <= P_METRICS; i++)
                if (abs[i] && !(lock[i] = lock_of(abs[i])))
                        goto out;
        r = -EINVAL;
        if (abs[P_SOCKET] && abs[P_METRICS] &&
            (strcmp(abs[P_SOCKET], abs[P_METRICS]) == 0 || strcmp(lock[P_SOCKET], abs[P_METRICS]) == 0 ||
             strcmp(abs[P_SOCKET], lock[P_METRICS]) == 0)) {
                r = buf_set_err(err, r,
                                "--socket \"%s\" and --metrics-address \"%s\" collide (the same file, or one "
                                "is the other's lock file): give each its own path",
                                given[P_SOCKET], o->metrics_address);
                goto out;
        }
        for (int i = P_SOCKET; i <= P_METRICS; i++) {
                if (!abs[i])
                        continue;
                if (abs[P_MANIFESTS] && (seen_by_file_source(abs[i], abs[P_MANIFESTS]) ||
                                         strcmp(lock[i], abs[P_MANIFESTS]) == 0)) {
                        r = buf_set_err(err, r,
                                        "%s \"%s\" is in %s \"%s\": the file source would read the socket "
                                        "and its lock file as manifests; put it elsewhere",
                                        names[i], given[i], names[P_MANIFESTS], given[P_MANIFESTS]);
                        goto out;
                }
                if (abs[P_REGISTRY] && (strcmp(abs[i], abs[P_REGISTRY]) == 0 ||
                                        seen_by_plugin_manager(abs[i], abs[P_REGISTRY]))) {
                        r = buf_set_err(err, r,
                                        "%s \"%s\" is in %s \"%s\": the plugin manager would take it for "
                                        "a plugin; put it elsewhere",
                                        names[i], given[i], names[P_REGISTRY], given[P_REGISTRY]);
                        goto out;
                }
        }
        if (abs[P_MANIFESTS] && abs[P_REGISTRY] && strcmp(abs[P_MANIFESTS], abs[P_REGISTRY]) == 0) {
                r = buf_set_err(err, r,
                                "%s and %s are the same directory \"%s\": plugin sockets would be reported as "
                                "bad manifests; give each its own",
                                names[P_MANIFESTS], names[P_REGISTRY], given[P_MANIFESTS]);
                goto out;
        }
        r = 0;
out:
        for (int i = 0; i < P_N; i++)
                free(abs[i]);
        free(lock[0]);
        free(lock[1]);
        return r;
}

/* --kube-api-socket apart from the other paths, as check_conflicts()
 * keeps those apart: not another socket or its lock file (either way),
 * not where the file source or the plugin manager would read it.  0,
 * -EINVAL with a message, or -ENOMEM. */
static int check_kube_api_socket(const struct options *o, struct buf *err)
{
        const char *names[] = {"--socket", "--metrics-address"};
        const char *others[] = {o->socket_path, o->metrics_address ? metrics_unix_path(o->metrics_address) : NULL};
        char *k = NULL, *klock = NULL, *other = NULL, *olock = NULL, *dir = NULL;
        int r = -ENOMEM;

        if (!o->kube_api_socket)
                return 0;
        if (!(k = abs_clean(o->kube_api_socket)) || !(klock = lock_of(k)))
                goto out;
        for (size_t i = 0; i < 2; i++) {
                if (!others[i])
                        continue;
                free(other);
                free(olock);
                olock = NULL;
                if (!(other = abs_clean(others[i])) || !(olock = lock_of(other)))
                        goto out;
                if (strcmp(k, other) == 0 || strcmp(klock, other) == 0 || strcmp(k, olock) == 0) {
                        r = buf_set_err(err, -EINVAL,
                                        "--kube-api-socket \"%s\" and %s \"%s\" collide (the same file, or one "
                                        "is the other's lock file): give each its own path",
                                        o->kube_api_socket, names[i], others[i]);
                        goto out;
                }
        }
        if (o->pod_manifest_path && o->pod_manifest_path[0]) {
                if (!(dir = abs_clean(o->pod_manifest_path)))
                        goto out;
                if (seen_by_file_source(k, dir) || strcmp(klock, dir) == 0) {
                        r = buf_set_err(err, -EINVAL,
                                        "--kube-api-socket \"%s\" is in the static pod path \"%s\": the file "
                                        "source would read the socket and its lock file as manifests; put it "
                                        "elsewhere",
                                        o->kube_api_socket, o->pod_manifest_path);
                        goto out;
                }
                free(dir);
                dir = NULL;
        }
        if (o->plugins_dir && o->plugins_dir[0]) {
                if (!(dir = abs_clean(o->plugins_dir)))
                        goto out;
                if (strcmp(k, dir) == 0 || seen_by_plugin_manager(k, dir)) {
                        r = buf_set_err(err, -EINVAL,
                                        "--kube-api-socket \"%s\" is in --plugins-registry-dir \"%s\": the "
                                        "plugin manager would take it for a plugin; put it elsewhere",
                                        o->kube_api_socket, o->plugins_dir);
                        goto out;
                }
        }
        r = 0;
out:
        free(k);
        free(klock);
        free(other);
        free(olock);
        free(dir);
        return r;
}

/* --kube-api-address needs what authenticates its clients (a client CA,
 * or an API server for tokens), and an API server to ask for Webhook
 * authorization.  0 or -EINVAL with a message. */
static int check_kube_api_address(const struct options *o, struct buf *err)
{
        if (!o->kube_api_address) {
                if (o->kube_api_tls_cert || o->kube_api_tls_key || o->kube_api_client_ca)
                        return buf_set_err(err, -EINVAL,
                                           "--kube-api-tls-cert-file, --kube-api-tls-private-key-file and "
                                           "--kube-api-client-ca-file apply to --kube-api-address, which is not given");
                return 0;
        }
        if (!o->kube_api_tls_cert != !o->kube_api_tls_key)
                return buf_set_err(err, -EINVAL,
                                   "--kube-api-tls-cert-file and --kube-api-tls-private-key-file go together: give "
                                   "both, or neither for a self-signed pair in --kube-api-cert-dir");
        /* Without a client CA, bearer tokens are the only identity, and
         * only an API server can verify them. */
        if (!o->kube_api_client_ca && !o->kubeconfig && !o->in_cluster)
                return buf_set_err(err, -EINVAL,
                                   "--kube-api-address: nobody could authenticate, and anonymous requests are "
                                   "refused: give --kube-api-client-ca-file (client certificates), or an API "
                                   "server (--kubeconfig or --in-cluster) to verify bearer tokens");
        if (!o->kube_api_always_allow && !o->kubeconfig && !o->in_cluster)
                return buf_set_err(err, -EINVAL,
                                   "--kube-api-address: --kube-api-authorization-mode Webhook (the default) asks the "
                                   "API server, and none is configured (--kubeconfig or --in-cluster); give "
                                   "--kube-api-authorization-mode AlwaysAllow to let every authenticated client "
                                   "read the pods");
        return 0;
}

/* ---- the checkpoint (doc/checkpoint.md) -------------------------------------
 *
 * Flags only, not a KubeletConfiguration key: the file is often the
 * kubelet's own, whose strict decoding would warn about a field it does
 * not know, and a trust rule (who may write the directory) belongs on the
 * command line an administrator reads. */

/* One of the --checkpoint-* flags. */
static int apply_checkpoint_flag(struct options *o, int c, const char *v, struct flag_set *set, struct buf *err)
{
        if (c == OPT_CHECKPOINT_DIR)
                return str_set(&o->checkpoint_dir, v);
        if (!set->checkpoint_tuning)
                set->checkpoint_tuning = c == OPT_CHECKPOINT_INTERVAL ? "--checkpoint-interval"
                                         : c == OPT_CHECKPOINT_GRACE  ? "--checkpoint-grace"
                                                                      : "--checkpoint-max-age";
        if (c == OPT_CHECKPOINT_INTERVAL)
                return parse_duration_flag("checkpoint-interval", v, &o->checkpoint_interval_usec, err);
        if (c == OPT_CHECKPOINT_GRACE)
                return parse_duration_flag("checkpoint-grace", v, &o->checkpoint_grace_usec, err);
        return parse_duration_flag("checkpoint-max-age", v, &o->checkpoint_max_age_usec, err);
}

/* The checkpoint flags make sense together: a directory (absolute from
 * here on; "" turns it off) for an API server source that is not the
 * static pod directory, and no duration without it. */
static int check_checkpoint(struct options *o, const struct flag_set *set, struct buf *err)
{
        char *abs = NULL;
        int r;

        drop_empty(&o->checkpoint_dir);
        if (!o->checkpoint_dir) {
                if (set->checkpoint_tuning)
                        return buf_set_err(err, -EINVAL, "%s: needs --checkpoint-dir", set->checkpoint_tuning);
                return 0;
        }
        if (!o->kubeconfig && !o->in_cluster)
                return buf_set_err(err, -EINVAL,
                                   "--checkpoint-dir: there is no API server source to keep (--kubeconfig or "
                                   "--in-cluster)");
        r = path_absolute(o->checkpoint_dir, NULL, &abs);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return buf_set_err(err, -EINVAL,
                                   "--checkpoint-dir \"%s\": relative, and the working directory is "
                                   "unknown: %s",
                                   o->checkpoint_dir, ERRNO_STR(r));
        free(o->checkpoint_dir);
        o->checkpoint_dir = abs;
        if (o->pod_manifest_path && strcmp(abs, o->pod_manifest_path) == 0)
                return buf_set_err(err, -EINVAL,
                                   "--checkpoint-dir \"%s\" is the static pod directory: the file source would read "
                                   "the checkpoint as a manifest; give it its own",
                                   abs);
        return 0;
}

/* --hostname-override as the kubelet takes it (nodeutil.GetHostname):
 * trimmed and lower-cased; empty, it is not given (the node name is
 * --node-name's, or the host name); blank, it is refused. */
static int apply_hostname_override(struct options *o, const char *v, struct flag_set *set, struct buf *err)
{
        char *name;

        if (!v[0]) {
                free(set->hostname_override);
                set->hostname_override = NULL;
                return str_set(&o->node_name, set->node_name);
        }
        name = strdup(v);
        if (!name)
                return -ENOMEM;
        node_name_normalize(name);
        if (!name[0]) {
                free(name);
                return buf_set_err(err, -EINVAL, "--hostname-override: \"%s\": empty hostname is invalid", v);
        }
        free(set->hostname_override);
        set->hostname_override = name;
        return str_set(&o->node_name, name);
}

/* One flag from getopt_long(): c its code, v its value, flag the flag as
 * given (for the messages).  Flags a --config value must not override
 * are marked in set. */
static int apply_flag(struct options *o, int c, const char *v, const char *flag, struct flag_set *set, struct buf *err)
{
        switch (c) {
        case OPT_NODE_NAME:
                set->node_name = v;
                return str_set(&o->node_name, v);
        case OPT_HOSTNAME_OVERRIDE:
                return apply_hostname_override(o, v, set, err);
        case OPT_POD_MANIFEST_PATH:
                set->path = true;
                o->explicit_sources = true;
                return str_set(&o->pod_manifest_path, v);
        case OPT_FILE_CHECK:
                set->file_check = true;
                return parse_duration_flag("file-check-frequency", v, &o->file_check_usec, err);
        case OPT_MANIFEST_URL:
                set->url = true;
                o->explicit_sources = true;
                return str_set(&o->manifest_url, v);
        case OPT_MANIFEST_URL_HEADER:
                set->headers = true;
                return options_add_headers(o, v, err);
        case OPT_FILE_PATTERN:
                return options_add_pattern(&o->file_patterns, &o->n_file_patterns, v, err);
        case OPT_HTTP_CHECK:
                set->http_check = true;
                return parse_duration_flag("http-check-frequency", v, &o->http_check_usec, err);
        case OPT_KUBECONFIG:
                o->explicit_sources = true;
                return str_set(&o->kubeconfig, v);
        case OPT_IN_CLUSTER:
                o->in_cluster = true;
                o->explicit_sources = true;
                return 0;
        case OPT_PLUGINS_DIR:
                set->plugins_dir = true;
                return str_set(&o->plugins_dir, v);
        case OPT_CONFIG:
                o->explicit_sources = true;
                return str_set(&o->config_file, v);
        case OPT_SOCKET:
                return str_set(&o->socket_path, v);
        case OPT_SOCKET_MODE:
                return parse_socket_mode(v, &o->socket_mode, err);
        case OPT_SOCKET_GROUP: {
                int r = parse_group(v, &o->socket_gid, err);

                o->set_socket_gid = r == 0;
                return r;
        }
        case OPT_ALLOW_UIDS:
                return parse_ids("allow-uids", v, (unsigned **)&o->allow_uids, &o->n_allow_uids, err);
        case OPT_ALLOW_GIDS:
                return parse_ids("allow-gids", v, (unsigned **)&o->allow_gids, &o->n_allow_gids, err);
        case OPT_METRICS_ADDRESS:
                return parse_metrics_address(v, &o->metrics_address, err);
        case OPT_KUBE_API_SOCKET:
                if (v[0] != '/')
                        return buf_set_err(err, -EINVAL, "--kube-api-socket \"%s\": an absolute path is needed", v);
                return str_set(&o->kube_api_socket, v);
        case OPT_KUBE_API_ADDRESS: {
                int r = kube_api_address_check(v, err);

                return r < 0 ? r : str_set(&o->kube_api_address, v);
        }
        case OPT_KUBE_API_TLS_CERT:
                return str_set(&o->kube_api_tls_cert, v);
        case OPT_KUBE_API_TLS_KEY:
                return str_set(&o->kube_api_tls_key, v);
        case OPT_KUBE_API_CERT_DIR:
                return str_set(&o->kube_api_cert_dir, v);
        case OPT_KUBE_API_CLIENT_CA:
                return str_set(&o->kube_api_client_ca, v);
        case OPT_KUBE_API_AUTHZ:
                if (strcmp(v, "AlwaysAllow") != 0 && strcmp(v, "Webhook") != 0)
                        return buf_set_err(err, -EINVAL,
                                           "--kube-api-authorization-mode \"%s\": expected AlwaysAllow or Webhook", v);
                o->kube_api_always_allow = strcmp(v, "AlwaysAllow") == 0;
                return 0;
        case OPT_KUBE_API_HISTORY: {
                int r = parse_size("kube-api-history", v, 1, &o->kube_api_history, err);

                if (r == 0 && o->kube_api_history > KUBE_VIEW_MAX_HISTORY)
                        r = buf_set_err(err, -EINVAL, "--kube-api-history %zu: at most %u", o->kube_api_history,
                                        KUBE_VIEW_MAX_HISTORY);
                return r;
        }
        case OPT_KUBE_API_MIN_REQUEST_TIMEOUT: /* more than 0, as every duration */
                return parse_duration_flag("kube-api-min-request-timeout", v, &o->kube_api_min_request_timeout_usec,
                                           err);
        case OPT_MODE:
                return parse_mode(v, &o->mode, err);
        case OPT_EVENTS:
                return parse_events(v, &o->events, err);
        case OPT_EVENT_QPS:
                set->event_qps = true;
                return parse_event_count("event-qps", v, &o->event_qps, err);
        case OPT_EVENT_BURST:
                set->event_burst = true;
                return parse_event_count("event-burst", v, &o->event_burst, err);
        case OPT_WATCH_LIST:
                o->watch_list = true;
                return 0;
        case OPT_RELIST_SPREAD:
                if (duration_parse(v, &o->relist_spread_usec) < 0)
                        return buf_set_err(err, -EINVAL,
                                           "--relist-spread: invalid duration \"%s\" (use Go syntax like 1m or 0)", v);
                return 0;
        case OPT_CHECKPOINT_DIR:
        case OPT_CHECKPOINT_INTERVAL:
        case OPT_CHECKPOINT_GRACE:
        case OPT_CHECKPOINT_MAX_AGE:
                return apply_checkpoint_flag(o, c, v, set, err);
        case 'v':
                return parse_verbosity(v, &o->verbosity, err);
        case OPT_LOG_FORMAT:
                return parse_log_format(v, &o->log_json, err);
        case OPT_MAX_BACKLOG:
                return parse_size("max-consumer-backlog", v, 1024, &o->max_backlog, err);
        case OPT_MAX_CONSUMERS:
                return parse_size("max-consumers", v, 1, &o->max_consumers, err);
        case OPT_HISTORY:
                return parse_size("history", v, 1, &o->history, err);
        case OPT_HISTORY_BYTES:
                return parse_size("history-bytes", v, 1024, &o->history_bytes, err);
        case 'h':
                o->help = true;
                return 0;
        default:
                return buf_set_err(err, -EINVAL, "%s: unknown flag", flag);
        }
}

/* The long flags whose names start with name[0..len), listed in out. */
static size_t prefix_matches(const struct option *opts, const char *name, size_t len, struct buf *out)
{
        size_t n = 0;

        for (; opts->name; opts++) {
                if (strncmp(opts->name, name, len) != 0)
                        continue;
                if (buf_printf(out, "%s--%s", n ? ", " : "", opts->name) < 0)
                        return SIZE_MAX;
                n++;
        }
        return n;
}

int options_bad_flag(int c, int argc, char *const *argv, const struct option *opts, struct buf *err)
{
        const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
        struct buf names = BUF_INIT;
        size_t len, n;
        int r;

        if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
                /* A short flag, maybe inside a cluster such as -hZ. */
                char flag[3] = {'-', optopt > 0 && optopt < 128 ? (char)optopt : '?', '\0'};

                return buf_set_err(err, -EINVAL, "%s: %s", flag, c == ':' ? "missing value" : "unknown flag");
        }
        if (c == ':')
                return buf_set_err(err, -EINVAL, "%s: missing value", arg);
        len = strcspn(arg + 2, "=");
        n = prefix_matches(opts, arg + 2, len, &names);
        if (n == SIZE_MAX)
                r = -ENOMEM;
        else if (n > 1)
                r = buf_set_err(err, -EINVAL, "%s: ambiguous: %s", arg, names.data);
        else if (n == 1 && arg[2 + len] == '=')
                r = buf_set_err(err, -EINVAL, "%s: takes no value", arg);
        else
                r = buf_set_err(err, -EINVAL, "%s: unknown flag", arg);
        buf_free(&names);
        return r;
}

/* Everything that has a default and was neither flagged nor in --config:
 * the socket ($PODMUX_SOCKET), the node name (the host name), the plugin
 * registry (options_default_plugins()).  Then the values that must not
 * be empty are checked, and an empty source flag turns its source off. */
static int apply_defaults(struct options *o, struct buf *err)
{
        const char *env_socket = getenv("PODMUX_SOCKET");
        int r;

        if (!o->socket_path &&
            (r = str_set(&o->socket_path, env_socket && env_socket[0] ? env_socket : OPTIONS_DEFAULT_SOCKET)) < 0)
                return r;
        if (!o->node_name) {
                char host[256] = "";

                if (options_default_node_name(host, sizeof(host)) < 0)
                        return buf_set_err(err, -EINVAL, "--node-name: not given and the host name is unknown");
                if ((r = str_set(&o->node_name, host)) < 0)
                        return r;
        }
        if (!o->plugins_dir && options_default_plugins(o, geteuid()) &&
            (r = str_set(&o->plugins_dir, OPTIONS_DEFAULT_PLUGINS_DIR)) < 0)
                return r;
        if (!o->node_name[0])
                return buf_set_err(err, -EINVAL, "--node-name: must not be empty");
        if (!o->socket_path[0])
                return buf_set_err(err, -EINVAL, "--socket: must not be empty");
        /* An empty source flag turns that source off, as in the kubelet
         * (it also keeps the --config file's value out). */
        drop_empty(&o->pod_manifest_path);
        drop_empty(&o->manifest_url);
        drop_empty(&o->kubeconfig);
        return 0;
}

/* The static pod path made absolute and cleaned: a relative
 * --pod-manifest-path is taken from the working directory, as podmux
 * validate takes its arguments (a relative staticPodPath was joined to
 * the --config file's directory by load_config()): one file has one
 * name, and its static pod one UID, however the path was spelled
 * (doc/pod-config.md 6.1). */
static int absolute_manifest_path(struct options *o, const struct flag_set *set, struct buf *err)
{
        char *abs = NULL;
        int r;

        if (!o->pod_manifest_path)
                return 0;
        r = path_absolute(o->pod_manifest_path, NULL, &abs);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return buf_set_err(err, -EINVAL, "%s \"%s\": relative, and the working directory is unknown: %s",
                                   set->path ? "--pod-manifest-path" : "staticPodPath (--config)", o->pod_manifest_path,
                                   ERRNO_STR(r));
        free(o->pod_manifest_path);
        o->pod_manifest_path = abs;
        return 0;
}

int options_parse(int argc, char **argv, struct options *o, struct buf *err)
{
        struct flag_set set = {0};
        int c, r = 0;

        memset(o, 0, sizeof(*o));
        o->file_check_usec = DEFAULT_CHECK_USEC;
        o->http_check_usec = DEFAULT_CHECK_USEC;
        o->socket_mode = STREAM_DEFAULT_SOCKET_MODE;
        o->mode = STORAGE_MODE_INCREMENTAL;
        o->max_backlog = STREAM_DEFAULT_MAX_BACKLOG;
        o->max_consumers = STREAM_DEFAULT_MAX_CONSUMERS;
        o->history = STREAM_DEFAULT_HISTORY;
        o->kube_api_history = KUBE_VIEW_DEFAULT_HISTORY;
        o->kube_api_min_request_timeout_usec = KUBE_API_DEFAULT_MIN_REQUEST_TIMEOUT_USEC;
        o->history_bytes = STREAM_DEFAULT_HISTORY_BYTES;
        o->events = true;
        o->event_qps = EVENT_DEFAULT_QPS;
        o->event_burst = EVENT_DEFAULT_BURST;
        o->checkpoint_interval_usec = API_CHECKPOINT_INTERVAL_USEC;
        o->checkpoint_grace_usec = API_CHECKPOINT_GRACE_USEC;
        o->checkpoint_max_age_usec = API_CHECKPOINT_MAX_AGE_USEC;
        o->relist_spread_usec = API_RELIST_SPREAD_USEC;
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":v:h", long_opts, NULL)) != -1) {
                const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";

                if (c == '?' || c == ':')
                        r = options_bad_flag(c, argc, argv, long_opts, err);
                else
                        r = apply_flag(o, c, optarg, flag, &set, err);
                if (r < 0)
                        goto fail;
        }
        if (optind < argc) {
                r = buf_set_err(err, -EINVAL, "unexpected argument \"%s\"", argv[optind]);
                goto fail;
        }
        if (o->help)
                goto out;
        if (o->config_file && (r = load_config(o, &set, err)) < 0)
                goto fail;
        if ((r = apply_defaults(o, err)) < 0 || (r = absolute_manifest_path(o, &set, err)) < 0 ||
            (r = check_conflicts(o, &set, err)) < 0 || (r = check_kube_api_socket(o, err)) < 0 ||
            (r = check_kube_api_address(o, err)) < 0 || (r = check_checkpoint(o, &set, err)) < 0)
                goto fail;
out:
        free(set.hostname_override);
        return 0;
fail:
        free(set.hostname_override);
        options_free(o);
        return r;
}
