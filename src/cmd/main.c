/* podmux — the pod-source front end of a node agent.  Subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/usage.h"
#include "util/log.h"
#include "cmd/options.h"
#include "kube/v1_schema.h"

static void usage(FILE *f)
{
        fputs("Usage: podmux COMMAND [FLAGS]\n"
              "\n"
              "Commands:\n"
              "  run        the daemon: gather, merge and stream the node's pods\n"
              "  watch      a consumer: print the update stream\n"
              "  validate   check static pod manifests the way the file source reads them\n"
              "  status     ask a running daemon for its sources, consumers, plugins and files\n"
              "  wait       wait until the daemon has applied (or refused) static pod files\n"
              "  version    print the version and the core/v1 schema's Kubernetes version\n"
              "\n"
              "Run 'podmux COMMAND --help' for a command's flags.\n",
              f);
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        if (strcmp(argv[1], "run") == 0)
                return cmd_run(argc - 1, argv + 1);
        if (strcmp(argv[1], "watch") == 0)
                return cmd_watch(argc - 1, argv + 1);
        if (strcmp(argv[1], "validate") == 0)
                return cmd_validate(argc - 1, argv + 1);
        if (strcmp(argv[1], "status") == 0)
                return cmd_status(argc - 1, argv + 1);
        if (strcmp(argv[1], "wait") == 0)
                return cmd_wait(argc - 1, argv + 1);
        if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
                printf("podmux %s (stream protocol 1)\n"
                       "core/v1 schema: Kubernetes %s (k8s.io/api %.12s)\n",
                       PODMUX_VERSION, v1_schema_kubernetes, v1_schema_commit);
                return 0;
        }
        if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
            strcmp(argv[1], "-h") == 0) {
                usage(stdout);
                return 0;
        }
        return cmd_usage_error(NULL, "%s: unknown command", argv[1]);
}
