/*
 * plugin_handlers — the in-process handlers of plugin types (CSIPlugin,
 * DevicePlugin, DRAPlugin), doing what the kubelet's handlers check when a
 * plugin registers (doc/plugin-manager.md section 8).
 *
 * Owns: per type, what is registered (CSI: driver name -> highest version;
 * DRA: driver name -> endpoints; devices: resource names).
 * Never: talks to plugins, logs.  Errors are returned as text for the
 * plugin and the consumers.
 */
#ifndef PODMUX_PLUGIN_HANDLERS_H
#define PODMUX_PLUGIN_HANDLERS_H

#include <stddef.h>

#include "util/buf.h"

#define PLUGIN_TYPE_CSI "CSIPlugin"
#define PLUGIN_TYPE_DEVICE "DevicePlugin"
#define PLUGIN_TYPE_DRA "DRAPlugin"

struct plugin_handlers;

int plugin_handlers_new(struct plugin_handlers **ret_h);
void plugin_handlers_free(struct plugin_handlers *h); /* NULL-safe */

/* 1 if a handler exists for type (exact, case-sensitive), else 0. */
int plugin_handlers_has(const struct plugin_handlers *h, const char *type);
/* 0, or -EINVAL with the reason in err (may be NULL; the convention of
 * util/buf.h), -ENOMEM. */
int plugin_handlers_validate(struct plugin_handlers *h, const char *type, const char *name, const char *endpoint,
                             char *const *versions, size_t n, struct buf *err);
/* 0; -EINVAL or -EEXIST (a DRA endpoint registered twice) with the reason
 * in err, as for validate; -ENOMEM. */
int plugin_handlers_register(struct plugin_handlers *h, const char *type, const char *name, const char *endpoint,
                             char *const *versions, size_t n, struct buf *err);
void plugin_handlers_deregister(struct plugin_handlers *h, const char *type, const char *name, const char *endpoint);

/* A version as the kubelet's CSI handler reads it (Go's ParseGeneric,
 * src/plugins/version.h): 0 and the first three numbers in ret (a
 * missing one is 0), or -EINVAL.  The CSI check itself compares every
 * number.  Tests only. */
int plugin_parse_version(const char *s, unsigned long ret[3]);

#endif
