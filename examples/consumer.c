/* consumer — keeps the node's pods with libpodmux-client and prints each
 * change.  cc consumer.c $(pkg-config --cflags --libs podmux-client)
 * (installed under another prefix P: PKG_CONFIG_PATH=P/lib/pkgconfig, and
 * -Wl,-rpath,P/lib or LD_LIBRARY_PATH=P/lib; README "Writing a consumer") */
#include <stdio.h>
#include <string.h>
#include <podmux/client.h>

/* The last error printed: while the daemon is away every retry fails
 * alike, and one line says so. */
static char last_error[256];

static void on_pods(struct podmux_client *c, const struct podmux_update *u, void *data)
{
        for (size_t i = 0; i < u->n_pods; i++)
                printf("%s %s %s/%s %s%s\n", podmux_op_name(u->op), podmux_pod_source(u->pods[i]),
                       podmux_pod_namespace(u->pods[i]), podmux_pod_name(u->pods[i]),
                       podmux_pod_uid(u->pods[i]), u->resync ? " (resync)" : "");
        fflush(stdout);
}

static void on_synced(struct podmux_client *c, bool resumed, void *data)
{
        last_error[0] = '\0';
        printf("synced %s: %zu pods\n", resumed ? "(resumed)" : "(full state)", podmux_client_pod_count(c));
        fflush(stdout);
}

static void on_error(struct podmux_client *c, const struct podmux_error *e, void *data)
{
        if (!e->fatal && strncmp(last_error, e->message, sizeof(last_error) - 1) == 0)
                return; /* the same failure again: said already */
        (void)snprintf(last_error, sizeof(last_error), "%s", e->message);
        fprintf(stderr, "consumer: %s%s\n", e->message, e->fatal ? "" : " (retrying)"); /* the library never logs */
}

int main(int argc, char **argv)
{
        struct podmux_client *c;
        int r = podmux_client_new(argc > 1 ? argv[1] : NULL, NULL, &c);

        if (r < 0)
                return 1;
        podmux_client_on_pods(c, on_pods);
        podmux_client_on_synced(c, on_synced);
        podmux_client_on_error(c, on_error);
        r = podmux_client_run(c, -1); /* reconnects and resumes by itself */
        podmux_client_free(c);
        return r < 0 ? 1 : 0;
}
