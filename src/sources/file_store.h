/*
 * file_store — the file source's keyed state: the pods by namespace/name
 * (struct entry), the key each file names (struct file_name), the keys
 * named once (struct keyref) and the UID counts, kept in step; which file
 * keeps a duplicated key (the first in sorted order), and the verdict a
 * file's record gets from the state (file_store_settle()).
 *
 * Never reads a file, watches or sends (file_store_update() builds the SET
 * the caller sends); the duplicate warnings it asks for are
 * src/sources/file_reports.h's.
 *
 * Costs: each store_set(), file_store_del(), file_store_name_key() and
 * file_store_put() is O(1) in the number of pods held, plus the pod's
 * key; file_store_update() is O(pods), for a relist's SET.
 */
#ifndef PODMUX_FILE_STORE_H
#define PODMUX_FILE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pod.h"
#include "sources/file_records.h"
#include "util/keymap.h"

struct file_source;

/*
 * A file as one state names it: the files map (keyed by the record's
 * path) holds it while the file names a key, and each entry whose pod the
 * file defined holds a reference.  An entry can outlive the file's place
 * in files for a moment (file_events_drop() takes the name out before the pod
 * goes), and a relist's state holds names of its own, hence the count.
 */
struct file_name {
        struct keyref *key; /* the key the file names; non-NULL iff in files */
        unsigned refs;      /* the files map's, while listed, and one per entry */
        /* --static-pod-file-pattern leaves the name out: it names its key
         * (to be told a duplicate) but never holds it. */
        bool filtered;
        struct frec *rec; /* a reference: the path is there */
};

/* A store key as the files name it, kept once: shared by the files naming
 * it, and borrowed as its key by the keyrefs index.  It goes with the last
 * of those files (the key need not be stored: a key whose files are all
 * bad now stays named until they go).  The key starts at offset 4. */
struct keyref {
        unsigned files; /* how many files name it */
        char key[];
};

struct entry {
        struct pod *pod;
        struct file_name *file; /* a reference */
        /* On the entry the uids index holds for its pod's UID: how many
         * stored pods have that UID (else unused). */
        unsigned same_uid;
};

/*
 * The source's pods, or those a relist gathers.  Only store_set(),
 * file_store_del(), file_store_name_key() and file_events_gone() change
 * the maps (file_store_state_free() and replace_state() drop or swap
 * them whole), and they keep them in step.  store, files and keyrefs are
 * keymaps, keyed by the text their items hold (an entry's pod's key, a
 * name's path, a keyref's text); uids holds one stored entry per UID,
 * which keeps the count, and when that entry leaves, another with the
 * same UID takes its place (uid_uncount).
 */
struct state {
        struct keymap *store; /* key -> struct entry* (keyed by the entries' pods' keys) */
        struct keymap *files; /* path -> struct file_name* (keyed by their paths) */
        /* Indexes that keep an event's cost independent of the number of
         * files: how many stored pods have each UID (a shared UID needs a
         * full SET), and how many files name each key (only a key named
         * by several files needs a search for the next one). */
        struct keymap *uids;    /* uid -> struct entry* whose same_uid counts it (keyed by its pod's UID) */
        struct keymap *keyrefs; /* key -> struct keyref* (keyed by their texts) */
};

/* The path of a file name: shorthand. */
#define NAME(f) ((f)->rec->path)

/* How many stored pods have uid. */
size_t file_store_count_of(struct keymap *uids, const char *uid);
/* A name of rec's file with no reference yet (the caller takes the
 * first), or NULL for want of memory; file_store_name_unref() drops one
 * (void *, to be a keymap's destructor). */
struct file_name *file_store_name_new(struct frec *rec, bool filtered);
void file_store_name_unref(void *v);
/* Drops kr from keyrefs if no file names it any more. */
void file_store_key_forget_unused(struct keymap *keyrefs, struct keyref *kr);
/* An empty state (0 or -ENOMEM), and its end (s may be half built). */
void file_store_state_free(struct state *s);
int file_store_state_init(struct state *s);
/* The entry r's file holds in st, or NULL; *ret_f its name if it names
 * a key.  file_store_rec_view() is the records' view callback (data: the
 * file source). */
const struct entry *file_store_rec_entry(const struct state *st, const struct frec *r, const struct file_name **ret_f);
void file_store_rec_view(void *data, const struct frec *r, struct file_record_view *v, struct file_record_pod *pod);
/* The store's one writers with store_set(): file_store_del() removes key
 * and its UID count; file_store_name_key() makes f name key (0 or
 * -ENOMEM).  Both keep the indexes in step. */
void file_store_del(struct state *s, const char *key);
int file_store_name_key(struct state *s, struct file_name *f, const char *key);
/* pod, or, when prev's entry for the same file holds an equal pod, that
 * one (the reference passes: pod is dropped, one to the kept pod is
 * returned), so a relist does not hold two copies of a pod. */
struct pod *file_store_keep_stored(const struct state *prev, const char *file, struct pod *pod);
/* The store's whole content as one sorted SET; 0 or -ENOMEM. */
int file_store_update(struct keymap *store, struct pod_update **ret_u);
/* rec's file -> pod into s, the first file in sorted order keeping a
 * key (a later one is warned about once).  The caller keeps its
 * reference to pod.  1 if the store changed, 0 if not, -errno. */
int file_store_put(struct file_source *fs, struct state *s, struct frec *rec, struct pod *pod);
/* Sets the record of f (naming a key in st): pending under sent (or
 * pend), applied, a duplicate or ignored (file_store.c says when). */
void file_store_settle(struct file_source *fs, const struct state *st, const struct file_name *f, uint64_t sent,
                       uint64_t pend, const char *uid);

#endif
