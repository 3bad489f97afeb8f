/*
 * reader_obj.h - the reader's opened objects (reader_obj.c), for reader.c:
 * a small LRU of objects, each with its fd and the version it is coded
 * against, checked when opened; and a pool of decoding contexts.
 */
#ifndef ULP_STORE_READER_OBJ_H
#define ULP_STORE_READER_OBJ_H

#include "store/store_core.h"
#include "store/remote.h"

#define OBJ_BUCKETS 256

typedef struct ulp_oentry {
	uint64_t vid;
	int fd; /* -1: read remotely (remote_name) */
	const ulp_remote *remote;
	char remote_name[ULP_OBJ_NAME_LEN];
	ulp_object *obj; /* NULL for a plain version */
	int plain;       /* fd is the version's plain bytes (plain.h) */
	uint64_t plain_size;
	uint64_t ref;  /* reference version, 0: none */
	uint64_t side; /* side version, 0: none */
	uint64_t side_size;
	uint8_t side_hash[16];
	unsigned depth; /* references between it and a keyframe */
	unsigned refs;
	int linked;
	struct ulp_oentry *hnext, *lprev, *lnext;
} ulp_oentry;

/* Chunk lengths whose all-zero hash is known (a few: chunks are mostly
 * of the default size). */
#define ZERO_MEMO 8

struct ulp_reader {
	pthread_mutex_t mu;
	ulp_oentry *tab[OBJ_BUCKETS];
	size_t count;
	ulp_oentry lru; /* sentinel; lnext is the most recent */
	ulp_dctx **pool;
	size_t npool, cap;
	uint32_t zlen[ZERO_MEMO]; /* under mu */
	uint64_t zhash[ZERO_MEMO];
	unsigned znext;
};

/* The opened object of version vid, referenced (opened and checked
 * against the catalog if it was not); ulp_robj_put drops the reference. */
int ulp_robj_get(ulp_store *st, uint64_t vid, ulp_oentry **out);
void ulp_robj_put(ulp_reader *r, ulp_oentry *e);
/* A decoding context from the pool (or a new one; NULL: no memory), and
 * back to it.  Its decodes do not check the stored payload's checksum,
 * only the decoded bytes'. */
ulp_dctx *ulp_robj_dctx_get(ulp_reader *r);
void ulp_robj_dctx_put(ulp_reader *r, ulp_dctx *d);

#endif /* ULP_STORE_READER_OBJ_H */
