/*
 * versions.h - the rules of versions: which one is current, history, retiring
 * and releasing them, the paths they are recorded under and reading their
 * rows (versions.c; the tensor map reader is encoder.c's,
 * ulp_ns_history_path link.c's).
 */
#ifndef ULP_STORE_VERSIONS_H
#define ULP_STORE_VERSIONS_H

#include "store/store_core.h"

/* ------------------------------------------------------------ versions
 * (versions.c; all with st->mu held, inside a transaction) */

/* The path the history of the live file at path is recorded under: path
 * itself, or for a hard-linked file its oldest name's (malloc()ed into
 * *buf, freed by the caller).  mu held (link.c). */
const char *ulp_ns_history_path(ulp_store *st, const char *path, char **buf);
/* The path of an inode ("" for the root, "a/b" otherwise) in a malloc()ed
 * string: 0 or -errno (-ENOENT when the inode has no entry). */
int ulp_ns_path_alloc(ulp_store *st, uint64_t ino, char **out);
/* The inode at path ("a/b", "" the root): 0, -ENOENT.  The one path
 * resolver of the store. */
int ulp_ns_resolve(ulp_store *st, const char *path, uint64_t *ino);
/* Whether path names an existing entry: 1, 0 or -errno. */
int ulp_ns_path_exists(ulp_store *st, const char *path);
/* The paths strictly below path sort (bytewise, as the catalog compares
 * them) in [*lo, *hi): "a/b/" to "a/b0"; for "" (the root), every path.
 * Both strings are malloc()ed. */
int ulp_path_range(const char *path, char **lo, char **hi);

/* Within a rename's transaction: the current versions of live files at
 * old_path (or below it) take the corresponding path under new_path. */
int ulp_versions_repath(ulp_store *st, const char *old_path,
                        const char *new_path, int subtree);
/* Release the history of path (and, with subtree, of everything below it)
 * that is neither a current version nor pinned by a snapshot. */
int ulp_versions_release_path(ulp_store *st, const char *path, int subtree,
                              ulp_obj_list *dead);
/* A version stops being the current one of its file (a newer one was
 * committed, or the file is destroyed): it stays as history while its
 * path names an entry, else it is released.  The one rule for both. */
int ulp_versions_retire(ulp_store *st, uint64_t vid, ulp_obj_list *dead);
/* The path of version vid (with live, only while it is live) into *path,
 * malloc'd: 1, 0 (none), or -errno. */
int ulp_version_path_locked(ulp_store *st, uint64_t vid, int live, char **path);
/* Whether vid is some inode's current version: 1, 0, or -errno. */
int ulp_version_is_current_locked(ulp_store *st, uint64_t vid);
/* Release one version (no longer current). */
int ulp_versions_release(ulp_store *st, uint64_t vid, ulp_obj_list *dead);
/* Turn ghosts nothing depends on into deleted versions. */
int ulp_versions_settle(ulp_store *st, ulp_obj_list *dead);

/* The versions of each state, their stored bytes (deleted ones aside) and
 * the logical bytes of the live ones, into out (ulp_store_stats_get).
 * 0 or -errno. */
int ulp_versions_tally(ulp_store *st, ulp_store_stats *out);

/* The tensor map stored with a version (empty when it had none;
 * encoder.c). */
int ulp_version_tmap_locked(ulp_store *st, uint64_t vid, ulp_tensor_map *out);
/* The row of version vid: 0, -ENOENT, -errno. */
int ulp_version_get_locked(ulp_store *st, uint64_t vid, ulp_version_info *out);
/* Read a version row's columns (Q_VCOLS order) from a statement. */
void ulp_version_from_row(sqlite3_stmt *s, ulp_version_info *v);
#define ULP_VCOLS                                                         \
	"id, ino, seq, size, mtime, created, hash, ref, depth, keyframe," \
	" stored, state, layout, object, path, side, plain"

#endif /* ULP_STORE_VERSIONS_H */
