/*
 * path — lexical path handling shared by everything that names files: the
 * file source, `podmux validate` and the plugin manager, so one file always
 * has one name (and one static-pod UID).
 *
 * Owns: nothing beyond the strings it returns (the caller frees them).
 * Never: touches the file system (no realpath: symlinks stay as given);
 * path_absolute() only reads the working directory's name.
 */
#ifndef PODMUX_PATH_H
#define PODMUX_PATH_H

/* Go's filepath.Clean: one '/' between elements, no "." elements, ".."
 * removes the element before it (or vanishes at the root), no trailing
 * '/', "" becomes ".".  NULL on ENOMEM. */
char *path_clean(const char *in);
/* dir + "/" + name (no doubled '/' after a root dir).  NULL on ENOMEM. */
char *path_join(const char *dir, const char *name);
/*
 * path made absolute and cleaned: joined to base when relative (base NULL:
 * the working directory), then path_clean().  So that a file has one name
 * (and a static pod one UID) however it was spelled: "a.yaml",
 * "./a.yaml", "/dir/a.yaml".  0 with *ret (the caller frees), -ENOMEM, or
 * -errno when the working directory's name cannot be had (it was
 * removed: -ENOENT).
 */
int path_absolute(const char *path, const char *base, char **ret);

#endif
