/*
 * codec_internal.h - definitions shared by the modules of libulp.
 *
 * Nothing here is part of the public API; include/ulpfs/ulp.h is.
 */
#ifndef ULP_CODEC_INTERNAL_H
#define ULP_CODEC_INTERNAL_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "ulpfs/ulp.h"

/* ------------------------------------------------------- byte order */

static inline uint16_t ulp_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t ulp_le32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t ulp_le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline void ulp_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void ulp_put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static inline void ulp_put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libulp assumes a little-endian host (tensor files are little-endian)"
#endif

/* ---------------------------------------------------------- varints */

/* LEB128, at most 10 bytes for a 64-bit value. */
static inline size_t ulp_varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* v in exactly n bytes (at least ulp_varint_put's): continuation bytes
 * of zero bits after the value's. */
static inline void ulp_varint_put_padded(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t k = 0; k + 1 < n; k++) {
		p[k] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n - 1] = (uint8_t)v;
}

/* Reads a varint from [*pp, end); returns 0 on success and advances *pp,
 * or ULP_ERR_CORRUPT on truncation or past ten bytes.  A padded varint
 * (ulp_varint_put_padded) reads as its value. */
static inline int ulp_varint_get(const uint8_t **pp, const uint8_t *end,
                                 uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (p >= end)
			return ULP_ERR_CORRUPT;
		uint8_t b = *p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*out = v;
			return ULP_OK;
		}
	}
	return ULP_ERR_CORRUPT;
}

#define ULP_VARINT_MAX 10

/* --------------------------------------------------------- dtype info */

typedef struct ulp_float_fmt {
	unsigned width; /* bits per element: 8, 16, 32, 64 */
	unsigned ebits; /* exponent bits */
	unsigned mbits; /* mantissa bits (width - ebits - 1) */
} ulp_float_fmt;

/* Float layout of dt; width 0 for ULP_DT_GENERIC. */
ulp_float_fmt ulp_dtype_fmt(ulp_dtype dt);

/* ------------------------------------------------------- growable buffer */

typedef struct ulp_buf {
	uint8_t *p;
	size_t len, cap;
} ulp_buf;

/* Ensure room for cap bytes in total; contents are kept. */
int ulp_buf_reserve(ulp_buf *b, size_t cap);
void ulp_buf_free(ulp_buf *b);

/* Length-prefixed pieces written in place: ulp_buf_open_gap leaves room
 * after out->len for the varint of a length of at most bound (returns
 * the gap's size, 0 without memory), the caller appends the piece, and
 * ulp_buf_close_gap writes the varint of the piece's length at start.
 * A piece of at least ULP_GAP_PAD_MIN bytes never moves unless it
 * outgrew its bound: its varint is padded to the gap (ulp_varint_get
 * reads a padded varint as the value).  A 2 MiB chunk's bound takes four
 * bytes and its coded length three, and moving the piece was a pass over
 * every coded byte; a smaller piece moves, which costs little and keeps
 * its varint short (an unchanged tensor's stream is one byte). */
#define ULP_GAP_PAD_MIN (64u << 10)
size_t ulp_buf_open_gap(ulp_buf *out, uint64_t bound);
int ulp_buf_close_gap(ulp_buf *out, size_t start, size_t gap);

/* ---------------------------------------------------------- plans */

/* One run of bytes inside a chunk: a contiguous logical range coded one
 * way.  Float runs are whole elements; ref_off is where the matching bytes
 * start in the reference (generic runs: clipped to the reference size).
 * A float run may instead be coded against the side file (side set,
 * has_ref clear): its reference is then the side's bytes at side_off
 * through xform (ULP_SIDE_*).  In a plan, side marks a candidate beside
 * has_ref; the chunk encoder keeps one of the two. */
typedef struct ulp_run {
	uint64_t len;
	uint64_t ref_off;
	uint64_t side_off;
	uint8_t dtype; /* ulp_dtype */
	uint8_t has_ref;
	uint8_t side;
	uint8_t xform;
} ulp_run;

/* Side bytes behind len bytes of a run through xform. */
static inline uint64_t ulp_side_len(uint64_t len, unsigned xform)
{
	return xform == ULP_SIDE_WIDEN_BF16 ? len / 2 : len;
}

typedef struct ulp_chunk_plan {
	uint64_t off;
	uint32_t len;
	uint32_t first_run; /* index into ulp_plan.runs */
	uint32_t nruns;
} ulp_chunk_plan;

struct ulp_plan {
	uint64_t size;
	uint64_t ref_size;
	uint64_t side_size;
	int has_ref;
	int has_side; /* some run has a side candidate */
	ulp_params params;
	ulp_chunk_plan *chunks;
	size_t nchunks;
	ulp_run *runs;
	size_t nruns;
};

/* Fill *p with the defaults for any zero field. */
void ulp_params_resolve(const ulp_params *in, ulp_params *out);

/* -------------------------------------------------------- container */

#define ULP_OBJ_MAGIC "ULPFSOB1"
#define ULP_OBJ_END_MAGIC "ULPFSEND"
/* Object formats.  Every rANS block says its own bitstream in its header
 * byte, so a decoder reads any mix; the format number is what tells an
 * older reader that it cannot (ULP_ERR_VERSION, not chunks that look
 * corrupt), so it is the newest bitstream a writer may use.
 * 2: 32-lane rANS blocks; format-1 objects (4 lanes) still decode, and
 * the lane count is in every block's header, so nothing else differs.
 * 3: the file hash is the tree hash (ULP_HASH_TREE); formats 1-2 have the
 * whole-file XXH3-128.
 * 4: large delta streams' tables come from a sample, with escaped symbols
 * (rans.h: ulp_rans_encode_esc).  The hash kind is a header flag:
 * ULP_OBJ_FLAG_FLAT_HASH for versions that were committed with the
 * whole-file XXH3-128, which format 3's writer said by writing format 2.
 * Everything is written as the newest format: a format-2 header on
 * format-4 blocks would promise format-2 readers an object they cannot
 * decode.
 * 5: standalone streams of at least 1024 elements are ULP_SC_FUSED, one
 * rANS symbol per element (floatcode.c).
 * 6: rANS blocks of at least ULP_RANS_WIDE64_MIN symbols have 64 lanes
 * (rans.h), which the SIMD decoders step as two independent sets of 32. */
#define ULP_OBJ_FORMAT 6
#define ULP_OBJ_FORMAT_MIN 1
#define ULP_OBJ_HEADER_SIZE 48
#define ULP_OBJ_INDEX_ENTRY 32
#define ULP_OBJ_TRAILER_SIZE 64
#define ULP_OBJ_FLAG_HAS_REF 1u
#define ULP_OBJ_FLAG_FLAT_HASH 2u /* format 4 on */
/* A side section follows the header: u64 side_size, side_hash[16],
 * u64 zero, u64 XXH3-64 of its bytes 0..31 (format 4 on). */
#define ULP_OBJ_FLAG_HAS_SIDE 4u
#define ULP_OBJ_SIDE_SIZE 40

#define ULP_IDX_FLAG_NEEDS_REF 1u
#define ULP_IDX_FLAG_NEEDS_SIDE 2u

/* In a chunk's runs list, the dtype byte's bit for a run coded against
 * the side file (followed by varint side_off and u8 xform). */
#define ULP_RUN_SIDE 0x40u

/* One chunk as the object index describes it. */
typedef struct ulp_obj_chunk {
	uint64_t off;        /* logical offset */
	uint64_t stored_off; /* offset of the payload in the object */
	uint32_t len;        /* logical bytes */
	uint32_t stored_len; /* payload bytes */
	uint32_t flags;      /* ULP_IDX_FLAG_* */
	uint64_t dec_hash;   /* XXH3-64 of the logical bytes */
	uint64_t pay_hash;   /* XXH3-64 of the payload */
} ulp_obj_chunk;

struct ulp_object {
	ulp_read_at_fn read_at;
	void *opaque;
	const uint8_t *mem; /* ulp_object_open_mem: payloads read in place */
	uint64_t obj_size;
	uint16_t format;
	uint64_t size;
	uint64_t ref_size;
	int has_ref;
	int flat_hash; /* ULP_OBJ_FLAG_FLAT_HASH */
	uint8_t ref_hash[16];
	int has_side;
	uint64_t side_size;
	uint8_t side_hash[16];
	uint64_t payload_off; /* where the first chunk's payload starts */
	uint8_t file_hash[16];
	size_t nchunks;
	ulp_obj_chunk *chunks;
	uint32_t max_len; /* largest chunk's logical length */
};

/* Whether an encoded chunk reads reference bytes and side bytes
 * (ULP_ERR_CORRUPT if its runs list cannot be parsed). */
int ulp_chunk_needs_ref(const uint8_t *enc, size_t len, int *needs,
                        int *needs_side);

/* Chunk payload kinds (first byte of every encoded chunk). */
enum {
	ULP_CHUNK_RUNS = 1, /* runs list followed by one stream per class */
};

/* Stream codings (first byte of every stream inside a chunk). */
enum {
	ULP_SC_RAW = 0,        /* bytes stored as they are */
	ULP_SC_ZSTD = 1,       /* zstd, with the reference bytes as prefix */
	ULP_SC_IDENTICAL = 2,  /* equal to the reference bytes */
	ULP_SC_DELTA = 3,      /* float ULP residuals against the reference */
	ULP_SC_STANDALONE = 4, /* float exponent-coded, no reference */
	ULP_SC_FUSED = 5,      /* STANDALONE with one symbol an element */
};

/* ------------------------------------------------------- pool.c */

/* An encoder context from pool's spares (else a new one; NULL when out of
 * memory), and back: kept for the next job, up to a few per thread. */
ulp_cctx *ulp_pool_cctx_take(ulp_pool *pool);
void ulp_pool_cctx_give(ulp_pool *pool, ulp_cctx *cctx);
/* Buffers the pipeline's slots keep in a context between files (at most
 * ULP_CCTX_SPARES): a slot that starts without one takes a spare, and
 * gives it back when the file is done, so that a chunk's encoded bytes
 * do not land in memory allocated, and faulted in, afresh for every
 * file.  Take leaves *b as it is when the context has none; give frees
 * *b when the context's spares are full, and leaves *b empty. */
#define ULP_CCTX_SPARES 4
void ulp_cctx_spare_take(ulp_cctx *c, ulp_buf *b);
void ulp_cctx_spare_give(ulp_cctx *c, ulp_buf *b);
/* When enc is the output of c's last encode (ulp_chunk_encode*, enc_len
 * bytes), hand it to *b by exchanging buffers instead of copying it: 1, b
 * holding it and c keeping b's buffer for its next encode; else 0. */
int ulp_cctx_out_take(ulp_cctx *c, const void *enc, size_t enc_len, ulp_buf *b);

#endif /* ULP_CODEC_INTERNAL_H */
