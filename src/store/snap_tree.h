/*
 * snap_tree.h - the entries a snapshot pins (snap_tree.c).
 */
#ifndef ULP_STORE_SNAP_TREE_H
#define ULP_STORE_SNAP_TREE_H

#include "store/store_core.h"

/* Within a snapshot's transaction (snap_tree.c): record every entry below
 * (ino, path) of snapshot snap, then, once all paths are in, the links
 * and extended attributes. */
int ulp_snap_tree_pin(ulp_store *st, int64_t snap, uint64_t ino,
                      const char *path);
int ulp_snap_tree_finish(ulp_store *st, int64_t snap);

#endif /* ULP_STORE_SNAP_TREE_H */
