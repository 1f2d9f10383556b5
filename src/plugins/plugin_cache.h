/*
 * plugin_cache — the plugin manager's desired state of world (what the
 * registry directory holds) and actual state of world (what has been
 * handed to a handler), keyed by socket path (doc/plugin-manager.md
 * sections 6 and 7).
 *
 * Owns: the entries and their strings.
 * Never: decides anything (the reconciler compares; ops write the ASW; the
 * watcher writes the DSW).
 */
#ifndef PODMUX_PLUGIN_CACHE_H
#define PODMUX_PLUGIN_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct plugin_dsw_entry {
        char *path;
        uint64_t generation; /* never reused: what the reconciler compares */
        uint64_t timestamp;  /* wall clock µs of the observation; display only */
};

struct plugin_asw_entry {
        char *path;
        uint64_t generation; /* of the DSW entry the op was started for */
        uint64_t timestamp;
        char *type;
        char *name;
        char *endpoint;
        char **versions;
        size_t n_versions;
};

struct plugin_cache;

int plugin_cache_new(struct plugin_cache **ret_c);
void plugin_cache_free(struct plugin_cache *c); /* NULL-safe */

/* DSW.  add_or_update always stores a fresh entry with a new generation.
 * -EINVAL for an empty path. */
int plugin_dsw_add_or_update(struct plugin_cache *c, const char *path, uint64_t wall);
void plugin_dsw_remove(struct plugin_cache *c, const char *path);
const struct plugin_dsw_entry *plugin_dsw_get(const struct plugin_cache *c, const char *path);
/* Snapshot of the entries (borrowed pointers valid until the next change),
 * sorted by path.  Caller frees the array. */
int plugin_dsw_list(const struct plugin_cache *c, const struct plugin_dsw_entry ***ret, size_t *ret_n);

/* ASW.  add copies e; -EINVAL for an empty path. */
int plugin_asw_add(struct plugin_cache *c, const struct plugin_asw_entry *e);
void plugin_asw_remove(struct plugin_cache *c, const char *path);
/* The entry of path, or NULL (tests only). */
const struct plugin_asw_entry *plugin_asw_get(const struct plugin_cache *c, const char *path);
int plugin_asw_list(const struct plugin_cache *c, const struct plugin_asw_entry ***ret, size_t *ret_n);
/* True iff path is in the ASW with the DSW entry's generation. */
int plugin_asw_same_generation(const struct plugin_cache *c, const struct plugin_dsw_entry *d);

#endif
