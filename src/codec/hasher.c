/*
 * hasher.c - content hashes: the tree hash of object format 3 and the
 * whole-file XXH3-128 of formats 1-2, streamed.
 *
 * The tree hash is one level deep so that an unchanged chunk of a patched
 * file is hashed from its index entry (the XXH3-64 of its decoded bytes)
 * instead of being decoded: the leaves are ULP_HASH_LEAF-byte blocks, the
 * codec's default chunk size, which a generic file is cut at.
 */
#include <stdlib.h>

#include "hash.h"
#include "codec_internal.h"

struct ulp_hasher {
	int kind;
	int failed;
	int closed;      /* a short (last) leaf was added: nothing may follow */
	uint64_t total;  /* bytes hashed */
	uint64_t filled; /* bytes of the current leaf */
	XXH3_state_t *outer;
	XXH3_state_t *leaf; /* tree only */
};

ulp_hasher *ulp_hasher_new(int kind)
{
	ulp_hasher *h;

	if (kind != ULP_HASH_FLAT && kind != ULP_HASH_TREE)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->kind = kind;
	h->outer = XXH3_createState();
	h->leaf = kind == ULP_HASH_TREE ? XXH3_createState() : NULL;
	if (!h->outer || (kind == ULP_HASH_TREE && !h->leaf)) {
		ulp_hasher_free(h);
		return NULL;
	}
	XXH3_128bits_reset(h->outer);
	if (h->leaf)
		XXH3_64bits_reset(h->leaf);
	return h;
}

void ulp_hasher_free(ulp_hasher *h)
{
	if (!h)
		return;
	XXH3_freeState(h->outer);
	XXH3_freeState(h->leaf);
	free(h);
}

static void push_leaf(ulp_hasher *h, uint64_t leaf_hash)
{
	uint8_t le[8];
	ulp_put64(le, leaf_hash);
	XXH3_128bits_update(h->outer, le, sizeof(le));
}

void ulp_hasher_update(ulp_hasher *h, const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!len)
		return;
	if (h->closed) {
		h->failed = 1;
		return;
	}
	h->total += len;
	if (h->kind == ULP_HASH_FLAT) {
		XXH3_128bits_update(h->outer, p, len);
		return;
	}
	while (len) {
		size_t take = ULP_HASH_LEAF - h->filled;
		if (take > len)
			take = len;
		XXH3_64bits_update(h->leaf, p, take);
		h->filled += take;
		p += take;
		len -= take;
		if (h->filled == ULP_HASH_LEAF) {
			push_leaf(h, XXH3_64bits_digest(h->leaf));
			XXH3_64bits_reset(h->leaf);
			h->filled = 0;
		}
	}
}

int ulp_hasher_leaf(ulp_hasher *h, uint64_t leaf_hash, uint64_t len)
{
	if (h->kind != ULP_HASH_TREE || h->closed || h->filled || len == 0 ||
	    len > ULP_HASH_LEAF)
		return ULP_ERR_ARG;
	push_leaf(h, leaf_hash);
	h->total += len;
	h->closed = len < ULP_HASH_LEAF;
	return ULP_OK;
}

int ulp_hasher_final(ulp_hasher *h, uint8_t out[16])
{
	XXH128_canonical_t c;

	if (h->failed)
		return ULP_ERR_ARG;
	if (h->kind == ULP_HASH_TREE) {
		uint8_t tail[16];
		if (h->filled)
			push_leaf(h, XXH3_64bits_digest(h->leaf));
		ulp_put64(tail, ULP_HASH_LEAF);
		ulp_put64(tail + 8, h->total);
		XXH3_128bits_update(h->outer, tail, sizeof(tail));
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h->outer));
	memcpy(out, c.digest, 16);
	return ULP_OK;
}

int ulp_content_hash(int kind, const void *data, size_t len, uint8_t out[16])
{
	ulp_hasher *h = ulp_hasher_new(kind);
	int rc;

	if (!h)
		return kind == ULP_HASH_FLAT || kind == ULP_HASH_TREE
		               ? ULP_ERR_NOMEM
		               : ULP_ERR_ARG;
	ulp_hasher_update(h, data, len);
	rc = ulp_hasher_final(h, out);
	ulp_hasher_free(h);
	return rc;
}
