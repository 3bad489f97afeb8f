/*
 * fuzz_object.c - libFuzzer target: an object as the store reads it
 * (ulp_object_open_mem, then every chunk decoded), without a reference
 * or, built with -DFUZZ_WITH_REF=1 (fuzz_object_ref), with a reference
 * and a side file of the sizes the header names, whose bytes are a
 * fixed pattern.
 *
 * Every byte of an object is under a checksum, so a mutated object would
 * stop at the first one: the target first writes the right header, side,
 * index and trailer checksums into its copy of the input, and decodes
 * with the payload check off (ulp_dctx_set_payload_check), so that the
 * parser and the decoders see the mutated bytes.  Decoded bytes still
 * meet their checksum after decoding, which is the path corruption takes
 * on reads that skip the payload check.
 *
 * The codec must never ask for reference or side bytes outside the sizes
 * it was given (ulp.h): the callbacks abort if it does.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "codec_internal.h"
#include "fuzz_cpu.h"

#ifndef FUZZ_WITH_REF
#define FUZZ_WITH_REF 0
#endif

/* Decoded bytes per input at most: a reader decodes what it is asked
 * for, so an index of many large chunks is not the decoder's time. */
#define FUZZ_DECODE_BUDGET (96u << 20)

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void fix_checksums(uint8_t *b, size_t n)
{
	size_t t = ULP_OBJ_TRAILER_SIZE, payload = ULP_OBJ_HEADER_SIZE;
	if (n < ULP_OBJ_HEADER_SIZE + t)
		return;
	put64(b + 40, XXH3_64bits(b, 40));
	if ((ulp_le16(b + 10) & ULP_OBJ_FLAG_HAS_SIDE) &&
	    n >= ULP_OBJ_HEADER_SIZE + ULP_OBJ_SIDE_SIZE + t) {
		put64(b + 80, XXH3_64bits(b + 48, 32));
		payload += ULP_OBJ_SIDE_SIZE;
	}
	uint8_t *tr = b + n - t;
	uint64_t count = ulp_le64(tr + 8);
	if (count <= (n - t - payload) / ULP_OBJ_INDEX_ENTRY) {
		size_t len = (size_t)count * ULP_OBJ_INDEX_ENTRY;
		put64(tr + 40, XXH3_64bits(tr - len, len));
	}
	put64(tr + 56, XXH3_64bits(tr, 56));
}

typedef struct pattern {
	uint64_t size;
	unsigned seed;
} pattern;

/* Bytes of a reference that no real one would have, but that change
 * with the offset (so that deltas against them are not all zero). */
static int pattern_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	const pattern *p = opaque;
	if (off > p->size || len > p->size - off)
		abort(); /* the codec asked past the size it was given */
	uint8_t *o = buf;
	for (size_t i = 0; i < len; i++) {
		uint64_t x = (off + i) * 0x9e3779b97f4a7c15ull + p->seed;
		o[i] = (uint8_t)(x >> 56);
	}
	return 0;
}

static void decode_all(ulp_object *obj, const ulp_refs *refs)
{
	ulp_dctx *d = ulp_dctx_new();
	if (!d)
		abort();
	ulp_dctx_set_payload_check(d, 0);
	uint64_t budget = FUZZ_DECODE_BUDGET;
	size_t n = ulp_object_chunk_count(obj);
	for (size_t i = 0; i < n; i++) {
		uint64_t off;
		uint32_t len;
		ulp_object_chunk_range(obj, i, &off, &len);
		if (len > budget)
			break;
		budget -= len;
		uint8_t *dst = malloc(len);
		if (!dst)
			abort();
		(void)ulp_chunk_decode_refs(d, obj, i, refs, dst);
		free(dst);
	}
	ulp_dctx_free(d);
}

static void fuzz_one(const uint8_t *data, size_t size)
{
	uint8_t *b = malloc(size + 1);
	if (!b)
		abort();
	memcpy(b, data, size);
	fix_checksums(b, size);
	ulp_object *obj;
	if (ulp_object_open_mem(b, size, &obj) == 0) {
		pattern ref = { ulp_object_ref_size(obj), 1 };
		pattern side = { ulp_object_side_size(obj), 2 };
		ulp_refs refs = { 0 }; /* no reference: no callbacks */
		if (FUZZ_WITH_REF) {
			refs.ref_read = pattern_read;
			refs.ref_opaque = &ref;
			refs.side_read = pattern_read;
			refs.side_opaque = &side;
			refs.side_hash = ulp_object_side_hash(obj);
			refs.side_size = side.size;
		}
		decode_all(obj, &refs);
		ulp_object_close(obj);
	}
	free(b);
}
