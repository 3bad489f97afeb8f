/*
 * recover.h - the steps of opening a store (store.c, private.c), which
 * ulp_store_open (store_api.c) composes.
 */
#ifndef ULP_STORE_RECOVER_H
#define ULP_STORE_RECOVER_H

#include "store/store_core.h"

/* The store's lock and condition variables.  0 or -errno. */
int ulp_sync_init(ulp_store *st);
/* Create or open st->dir (refusing a directory that holds anything but a
 * store), take its lock, open objects/ and staging/.  0, -ENOTEMPTY (not
 * a store), -EBUSY (open elsewhere) or -errno. */
int ulp_dirs_open(ulp_store *st);
/* Make the store private to the user it runs as: loose modes of st->dir
 * and what it holds tightened to 0700 and 0600, and logged (private.c).
 * 0 or -errno. */
int ulp_private_open(ulp_store *st);
/* After a crash (mu not held): destroy orphans, requeue staged files,
 * settle ghosts, remove unreferenced objects, restore the reserve. */
int ulp_recover(ulp_store *st);

#endif /* ULP_STORE_RECOVER_H */
