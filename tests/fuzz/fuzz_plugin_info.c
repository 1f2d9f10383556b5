/*
 * fuzz_plugin_info — what a plugin's registration service answers: the
 * gRPC reply body (grpc_unframe), the PluginInfo it carries
 * (pluginregistration__plugin_info__unpack), the checks and registration
 * of the plugin's type handler (plugin_handlers_validate / _register /
 * _deregister, as plugin_manager's on_getinfo does) and the "plugin"
 * object consumers get (plugin_event_render); also a grpc-message trailer
 * (grpc_message_decode) as it reaches a FAILED event.
 *
 * Input: a framed reply body; when it is not one, the whole input is taken
 * as the message, so mutations need not keep the length prefix right.
 * Checked: a refused frame has a reason; every rendered object and error
 * text is valid JSON in UTF-8; a plugin that validated registers, and
 * validates again only where the handler allows a second registration.
 */
#include "fuzz.h"

#include "pluginregistration.pb-c.h"
#include "util/buf.h"
#include "plugins/grpc_client.h"
#include "plugins/plugin_handlers.h"
#include "plugins/plugin_manager.h"

#define SOCKET "/var/lib/kubelet/plugins_registry/fuzz.sock"

/* The text as the stream carries it: a JSON string. */
static void check_text(const char *s, const char *what)
{
        struct buf out = BUF_INIT;

        FUZZ_ASSERT(buf_json_string(&out, s, strlen(s)) == 0);
        fuzz_check_json(out.data, out.len, what);
        buf_free(&out);
}

static void check_event(const Pluginregistration__PluginInfo *info, const char *endpoint,
                        const char *op, const char *error)
{
        struct plugin_event ev = {
                .op = op,
                .socket = SOCKET,
                .type = info->type ? info->type : "",
                .name = info->name ? info->name : "",
                .endpoint = endpoint,
                .versions = info->supported_versions,
                .n_versions = info->n_supported_versions,
                .error = error,
        };
        struct buf out = BUF_INIT;

        FUZZ_ASSERT(plugin_event_render(&ev, &out) == 0);
        fuzz_check_json(out.data, out.len, "a plugin event");
        if (error)
                check_text(error, "a plugin error");
        buf_free(&out);
}

static void check_info(const Pluginregistration__PluginInfo *info)
{
        const char *endpoint = info->endpoint && info->endpoint[0] ? info->endpoint : SOCKET;
        struct plugin_handlers *h = NULL;
        struct buf e = BUF_INIT, t = BUF_INIT;

        FUZZ_ASSERT(plugin_handlers_new(&h) == 0);
        if (!plugin_handlers_has(h, info->type)) {
                FUZZ_ASSERT(buf_printf(&t, "RegisterPlugin error -- no handler registered for plugin type: %s at socket %s",
                                       info->type, SOCKET) == 0);
                check_event(info, endpoint, "FAILED", t.data);
        } else if (plugin_handlers_validate(h, info->type, info->name, endpoint, info->supported_versions,
                                            info->n_supported_versions, &e) < 0) {
                FUZZ_ASSERT(e.len > 0);
                FUZZ_ASSERT(buf_printf(&t, "RegisterPlugin error -- plugin validation failed with err: %s",
                                       e.data) == 0);
                check_event(info, endpoint, "FAILED", t.data);
        } else {
                buf_reset(&e);
                FUZZ_ASSERT(plugin_handlers_register(h, info->type, info->name, endpoint,
                                                     info->supported_versions, info->n_supported_versions,
                                                     &e) == 0);
                check_event(info, endpoint, "REGISTERED", NULL);
                /* The same plugin again: refused or accepted, never a crash. */
                buf_reset(&e);
                if (plugin_handlers_validate(h, info->type, info->name, endpoint, info->supported_versions,
                                             info->n_supported_versions, &e) < 0)
                        FUZZ_ASSERT(e.len > 0);
                plugin_handlers_deregister(h, info->type, info->name, endpoint);
                check_event(info, endpoint, "DEREGISTERED", NULL);
        }
        plugin_handlers_free(h);
        buf_free(&e);
        buf_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        Pluginregistration__PluginInfo *info;
        Pluginregistration__RegistrationStatusResponse *ack;
        const uint8_t *msg = NULL;
        const char *why = NULL;
        size_t len = 0;
        char *text = NULL;

        if (grpc_unframe(data, size, &msg, &len, &why) < 0) {
                FUZZ_ASSERT(why && why[0]);
                msg = data;
                len = size;
        } else {
                FUZZ_ASSERT(msg == data + 5 && len == size - 5);
        }
        info = pluginregistration__plugin_info__unpack(NULL, len, msg);
        if (info) {
                check_info(info);
                pluginregistration__plugin_info__free_unpacked(info, NULL);
        }
        ack = pluginregistration__registration_status_response__unpack(NULL, len, msg);
        if (ack)
                pluginregistration__registration_status_response__free_unpacked(ack, NULL);

        /* The same bytes as a grpc-message trailer of a failed call. */
        FUZZ_ASSERT(grpc_message_decode((const char *)data, size, &text) == 0);
        FUZZ_ASSERT(strlen(text) <= size);
        check_text(text, "a decoded grpc-message");
        free(text);
        return 0;
}
