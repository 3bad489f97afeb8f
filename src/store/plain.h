/*
 * plain.h - the newest version of a file kept as a plain file (plain.c):
 * its writer's staging file, fsynced and linked into objects/, which reads
 * serve by passthrough; coded (a reverse delta or standalone) by the flip
 * once a successor commits, or once plain files pass their space bound.
 */
#ifndef ULP_STORE_PLAIN_H
#define ULP_STORE_PLAIN_H

#include "store/store_core.h"

/* Whether in's staged bytes (size bytes; overlay: a copy-up on demand)
 * may commit as a plain newest: the option on, a local store, the whole
 * content in the staging file, no backing registration the kernel could
 * write through (mu held). */
int ulp_plain_wanted(ulp_store *st, const ulp_inode *in, uint64_t size,
                     int overlay);
/* fsync the staging file fd of in and link it into objects/ as a new
 * object (name filled), the directory fsynced; *disk: its allocated
 * bytes.  0 or -errno. */
int ulp_plain_link(ulp_store *st, const ulp_inode *in, int fd,
                   char name[ULP_OBJ_NAME_LEN], uint64_t *disk);
/* Inside a commit's transaction (mu held): past the space bound, mark the
 * least recently written plain newest versions to be coded standalone
 * (versions.flip = 0, for gc.c) until the rest fit.  0 or -errno. */
int ulp_plain_bound_txn(ulp_store *st);
/* The bytes of the plain versions that no flip is to code yet (mu
 * held): 0 or -errno. */
int ulp_plain_bytes(ulp_store *st, uint64_t *out);
/* An fd of version vid's plain file (read-only), or -ENOENT when it has
 * none now.  mu not held. */
int ulp_plain_open(ulp_store *st, uint64_t vid);
/* ULPFS_TEST_CRASH_COMMIT=N:S kills the process (SIGKILL) at stage S of
 * its N-th plain commit: 1 once the plain file is linked and durable, 2
 * once the transaction has committed, before the staging file goes.
 * Only tests set it. */
void ulp_plain_crash_point(unsigned n, unsigned stage);

#endif /* ULP_STORE_PLAIN_H */
