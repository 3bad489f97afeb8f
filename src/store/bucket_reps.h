/*
 * bucket_reps.h - each version's bucket representation, the rows a bucket
 * store (src/objstore/reps.c says why and what stays true) keeps in the
 * catalog, and the catalog copies a publish uploads.  A public header of
 * the store: the object store reaches the catalog through these calls
 * only.
 *
 * The table (schema version 10, catalog.c):
 *   bucket_reps(version, object, base, side, depth, stored, state)
 * version: a versions.id; object: the bucket object holding it; base: the
 * version that object is coded against (NULL: a bucket keyframe), always
 * one with an uploaded representation of its own, older than version;
 * side: the version its chunks read besides (NULL: none); depth: links to
 * its bucket keyframe; stored: the object's bytes; state: 0 pending (being
 * uploaded), 1 uploaded.  A version without a row is represented in the
 * bucket by its local object.
 *
 * A handle is a connection of its own to a live catalog.db (WAL: the
 * store keeps writing through its own), serialised by a mutex of the
 * handle; every call may be made from any thread.  Errors are logged to
 * stderr and returned as -errno.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_STORE_BUCKET_REPS_H
#define ULP_STORE_BUCKET_REPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ulp_breps ulp_breps;

/* Open the catalog at path (the store opened and migrated it first).  0 or
 * -errno (-ENOENT: the catalog has no bucket_reps table). */
int ulp_breps_open(const char *path, ulp_breps **out);
void ulp_breps_close(ulp_breps *r);

/* 1 when name is the local object of versions that all have another
 * uploaded representation; 2 when one of them is being given another (its
 * row pending); 0 otherwise, or on an error. */
int ulp_breps_superseded(ulp_breps *r, const char *name);
/* 1 when a representation names object name (1 on an error too: keep). */
int ulp_breps_names(ulp_breps *r, const char *name);

/* A representation dropped by ulp_breps_take_gone. */
typedef struct ulp_breps_gone {
	int64_t version;
	char object[40]; /* its bucket object */
	char local[40];  /* the version's local object ("": version gone) */
	int local_named; /* object is some live version's local object */
} ulp_breps_gone;

/* Delete the representations that no longer hold (pending ones, those of
 * versions or sides deleted, what is coded against any of those; every
 * one when all) and return them, malloc()ed.  0 or -errno. */
int ulp_breps_take_gone(ulp_breps *r, int all, ulp_breps_gone **out, size_t *n);

/* A new standalone version without a representation whose predecessor
 * (the live version the store flips against it) has an uploaded one. */
typedef struct ulp_breps_cand {
	int64_t id, base, depth; /* base: the predecessor; its depth */
	uint64_t stored;         /* bytes of the standalone object */
	char object[40];
} ulp_breps_cand;

/* Those versions, oldest first, malloc()ed.  0 or -errno. */
int ulp_breps_candidates(ulp_breps *r, ulp_breps_cand **out, size_t *n);
/* A pending representation of version (side 0: none).  0 or -errno. */
int ulp_breps_add(ulp_breps *r, int64_t version, const char *object,
                  int64_t base, int64_t side, int64_t depth, uint64_t stored);
/* A pending one uploaded (uploaded) or abandoned (its row deleted). */
int ulp_breps_settle(ulp_breps *r, int64_t version, int uploaded);
/* Every standalone version without a representation becomes a bucket
 * keyframe, uploaded (its local object is in the bucket).  0 or -errno. */
int ulp_breps_keyframes(ulp_breps *r);

/* An uploaded representation that is not its version's local object. */
typedef struct ulp_breps_item {
	uint64_t version, base; /* base 0: a bucket keyframe */
	char object[40];
} ulp_breps_item;

/* Those, by version, malloc()ed.  0 or -errno. */
int ulp_breps_items(ulp_breps *r, ulp_breps_item **out, size_t *n);

/* The catalog copy at path (not the live catalog) names the bucket's
 * objects: each represented version's object, base, side, stored bytes,
 * and the depths below.  0 (also for a copy without the table), -EIO
 * when a version would reach no root (never published). */
int ulp_breps_rewrite(const char *path);

/* A consistent copy of the live catalog at db into out (which must not
 * exist), without its WAL (cat_copy.c).  0 or -EIO. */
int ulp_cat_copy(const char *db, const char *out);

#endif
