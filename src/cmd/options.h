/*
 * options — the settings of `podmux run`: command-line flags (the kubelet's
 * names where one exists) over a KubeletConfiguration file (--config) over
 * defaults.
 *
 * Owns: the strings in struct options.  Never: opens sockets or starts
 * anything; it only parses and checks.
 */
#ifndef PODMUX_OPTIONS_H
#define PODMUX_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <getopt.h>
#include <sys/types.h>

#include "util/buf.h"
#include "sources/file_source.h"
#include "sources/http_source.h"
#include "core/storage.h"

#define OPTIONS_DEFAULT_SOCKET "/run/podmux/podmux.sock"
#define OPTIONS_DEFAULT_PLUGINS_DIR "/var/lib/kubelet/plugins_registry"
/* --kube-api-cert-dir, as the kubelet's --cert-dir is its own. */
#define OPTIONS_DEFAULT_KUBE_API_CERT_DIR "/var/lib/podmux/pki"
/* A KubeletConfiguration file this large or larger is refused. */
#define OPTIONS_CONFIG_MAX_BYTES (16u * 1024u * 1024u)
/* --static-pod-file-pattern: how many, and how long each may be. */
#define OPTIONS_MAX_PATTERNS FILE_SOURCE_MAX_PATTERNS
#define OPTIONS_MAX_PATTERN_LEN 255

/* The kubelet's default node name: the host name, trimmed of white space
 * and lower-cased, into out (size bytes).  0, -ENOENT for an empty host
 * name, or -errno from gethostname(). */
int options_default_node_name(char *out, size_t size);

struct options {
        char *node_name;
        char *pod_manifest_path;
        uint64_t file_check_usec;
        /* --static-pod-file-pattern, in the order given */
        char **file_patterns;
        size_t n_file_patterns;
        char *manifest_url;
        struct http_header *headers;
        size_t n_headers;
        uint64_t http_check_usec;
        char *kubeconfig;
        bool in_cluster;
        char *plugins_dir;
        char *socket_path;
        mode_t socket_mode;
        bool set_socket_gid;
        gid_t socket_gid;
        uid_t *allow_uids;
        size_t n_allow_uids;
        gid_t *allow_gids;
        size_t n_allow_gids;
        enum storage_mode mode;
        char *config_file;
        /* The top-level fields of the --config file that
         * KubeletConfiguration does not define, JSON-quoted and
         * ", "-separated, or NULL: for the caller to warn about once (this
         * module never logs). */
        char *config_unknown;
        int verbosity;
        int log_json;
        size_t max_backlog;
        size_t max_consumers;
        size_t history;
        size_t history_bytes;
        char *metrics_address;
        /* The Kubernetes API view (doc/kube-api.md): its socket (NULL:
         * off), its history and a watch's default length. */
        char *kube_api_socket;
        size_t kube_api_history;
        uint64_t kube_api_min_request_timeout_usec;
        /* --kube-api-address and its TLS files (NULL: none), the cert
         * dir (NULL: OPTIONS_DEFAULT_KUBE_API_CERT_DIR), and whether
         * AlwaysAllow was asked for. */
        char *kube_api_address;
        char *kube_api_tls_cert;
        char *kube_api_tls_key;
        char *kube_api_cert_dir;
        char *kube_api_client_ca;
        bool kube_api_always_allow;
        /* Events (doc/events.md): --events, --event-qps, --event-burst,
         * or eventRecordQPS and eventBurst in --config. */
        bool events;
        unsigned event_qps;
        unsigned event_burst;
        bool help;
        /* The API source's checkpoint (doc/checkpoint.md): the
         * directory (absolute; NULL: none) and its durations. */
        char *checkpoint_dir;
        uint64_t checkpoint_interval_usec;
        uint64_t checkpoint_grace_usec;
        uint64_t checkpoint_max_age_usec;
        uint64_t relist_spread_usec; /* --relist-spread */
        bool watch_list;             /* --watch-list */
        /* A source was configured on the command line: one of
         * --pod-manifest-path, --manifest-url, --kubeconfig, --in-cluster,
         * --config (even with an empty value). */
        bool explicit_sources;
};

/*
 * Parses argv (argv[0] is "run").  On a usage error returns -EINVAL with a
 * message naming the flag in err; the caller exits 2.  Reads --config when
 * given (flags win over the file; its unknown fields go to
 * config_unknown).  Fills defaults, including the node name from the host
 * name (lower-cased, like the kubelet) and the plugin registry
 * (options_default_plugins()).  --hostname-override is trimmed and
 * lower-cased as the kubelet takes it; --node-name is kept as given.  The
 * static pod path is made absolute and cleaned (path_absolute()): a
 * relative --pod-manifest-path from the working directory, a relative
 * staticPodPath from the --config file's directory.  Every contradiction between flags
 * is a usage error found here, before the daemon creates anything:
 * --kubeconfig with --in-cluster, --node-name with a different
 * --hostname-override, and colliding paths (the stream and metrics
 * sockets and their lock files, the static pod path, the plugin
 * registry), and the checkpoint flags without an API server source or
 * without --checkpoint-dir, or the checkpoint directory being the static
 * pod directory.  An empty --pod-manifest-path, --manifest-url or
 * --kubeconfig turns that source off.
 */
int options_parse(int argc, char **argv, struct options *ret_opts, struct buf *err);
/* Whether the plugin manager watches OPTIONS_DEFAULT_PLUGINS_DIR when
 * --plugins-registry-dir is not given: only for euid 0 and with no
 * source configured on the command line (o->explicit_sources). */
bool options_default_plugins(const struct options *o, uid_t euid);
void options_free(struct options *o); /* NULL-safe */
/* The --help text. */
const char *options_usage(void);
/* The long flags podmux run takes (ends with a zeroed entry), so tests
 * can check that --help documents each (tests only). */
const struct option *options_flags(void);

/* Why getopt_long() refused a flag, for every subcommand alike: c is what
 * it returned ('?' or ':', with optind and optopt as it left them), opts
 * its long flags.  Into err, naming the flag as given: "--sockt: unknown
 * flag", "--so: ambiguous: --socket, --socket-mode, ...", "--help=x: takes
 * no value", "-o: missing value".  -EINVAL, or -ENOMEM (err empty). */
int options_bad_flag(int c, int argc, char *const *argv, const struct option *opts, struct buf *err);

/* Appends one --static-pod-file-pattern (copied) to *patterns: not empty,
 * no '/', at most OPTIONS_MAX_PATTERN_LEN bytes, at most
 * OPTIONS_MAX_PATTERNS of them.  0, -EINVAL (err names the flag) or
 * -ENOMEM.  podmux run and podmux validate share it. */
int options_add_pattern(char ***patterns, size_t *n, const char *v, struct buf *err);

/* Parses --manifest-url-header syntax "a:x,b:y" into o->headers. */
int options_add_headers(struct options *o, const char *spec, struct buf *err);

#endif
