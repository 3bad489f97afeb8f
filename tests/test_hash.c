/*
 * test_hash.c - content hashes: the tree hash of object format 3 against
 * its definition, the hasher's misuse, and the encoder hashing unchanged
 * chunks from the reference's index without reading a byte of them.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <xxhash.h>

#include "codec_internal.h"
#include "test_util.h"

/* The tree hash as ulp.h defines it, written out. */
static void tree_by_hand(const uint8_t *p, size_t len, uint8_t out[16])
{
	size_t nleaf = (len + ULP_HASH_LEAF - 1) / ULP_HASH_LEAF;
	uint8_t *s = tu_xmalloc(8 * nleaf + 16);
	for (size_t i = 0; i < nleaf; i++) {
		size_t off = i * ULP_HASH_LEAF;
		size_t n = len - off < ULP_HASH_LEAF ? len - off
		                                     : ULP_HASH_LEAF;
		ulp_put64(s + 8 * i, XXH3_64bits(p + off, n));
	}
	ulp_put64(s + 8 * nleaf, ULP_HASH_LEAF);
	ulp_put64(s + 8 * nleaf + 8, len);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(s, 8 * nleaf + 16));
	memcpy(out, c.digest, 16);
	free(s);
}

Test(hash, tree_hash_matches_its_definition)
{
	static const size_t sizes[] = { 0,
		                        1,
		                        ULP_HASH_LEAF - 1,
		                        ULP_HASH_LEAF,
		                        ULP_HASH_LEAF + 1,
		                        3 * ULP_HASH_LEAF,
		                        3 * ULP_HASH_LEAF + 4097 };
	size_t max = 3 * ULP_HASH_LEAF + 4097;
	uint8_t *p = tu_xmalloc(max);
	tu_rng r;
	tu_rng_init(&r, 41);
	tu_fill(&r, p, max);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		uint8_t want[16], got[16], flat[16], piece[16];
		tree_by_hand(p, n, want);
		TU_OK(ulp_content_hash(ULP_HASH_TREE, p, n, got), "hash");
		TU_MEMEQ(got, want, 16, "size %zu", n);
		ulp_hash128(p, n, flat);
		TU_OK(ulp_content_hash(ULP_HASH_FLAT, p, n, got), "flat");
		TU_MEMEQ(got, flat, 16, "flat, size %zu", n);
		TU_ASSERT(memcmp(want, flat, 16) != 0, "kinds equal, %zu", n);
		/* streamed in odd pieces, and leaf by leaf where whole */
		ulp_hasher *h = ulp_hasher_new(ULP_HASH_TREE);
		cr_assert(h);
		for (size_t off = 0; off < n;) {
			size_t take = 1 + tu_below(&r, 3u << 20);
			if (off % ULP_HASH_LEAF == 0 && tu_chance(&r, 1, 2)) {
				size_t l = n - off < ULP_HASH_LEAF
				                   ? n - off
				                   : ULP_HASH_LEAF;
				TU_OK(ulp_hasher_leaf(
					      h, XXH3_64bits(p + off, l), l),
				      "leaf at %zu", off);
				off += l;
				continue;
			}
			if (take > n - off)
				take = n - off;
			ulp_hasher_update(h, p + off, take);
			off += take;
		}
		TU_OK(ulp_hasher_final(h, piece), "final");
		TU_MEMEQ(piece, want, 16, "streamed, size %zu", n);
		ulp_hasher_free(h);
	}
	free(p);
}

Test(hash, hasher_misuse)
{
	uint8_t b[16] = { 0 }, out[16];
	cr_assert_null(ulp_hasher_new(0));
	TU_RC(ulp_content_hash(7, b, 1, out), ULP_ERR_ARG, "kind");
	ulp_hasher *h = ulp_hasher_new(ULP_HASH_TREE);
	ulp_hasher_update(h, b, 3);
	TU_RC(ulp_hasher_leaf(h, 1, ULP_HASH_LEAF), ULP_ERR_ARG,
	      "a leaf inside a leaf");
	ulp_hasher_free(h);
	h = ulp_hasher_new(ULP_HASH_TREE);
	TU_RC(ulp_hasher_leaf(h, 1, ULP_HASH_LEAF + 1), ULP_ERR_ARG, "long");
	TU_RC(ulp_hasher_leaf(h, 1, 0), ULP_ERR_ARG, "empty");
	TU_OK(ulp_hasher_leaf(h, 1, 100), "a short last leaf");
	TU_RC(ulp_hasher_leaf(h, 1, 100), ULP_ERR_ARG, "after the last");
	ulp_hasher_update(h, b, 1);
	TU_RC(ulp_hasher_final(h, out), ULP_ERR_ARG, "bytes after the last");
	ulp_hasher_free(h);
	h = ulp_hasher_new(ULP_HASH_FLAT);
	TU_RC(ulp_hasher_leaf(h, 1, 100), ULP_ERR_ARG, "a leaf of a flat hash");
	ulp_hasher_free(h);
}

/* A reference read through tu_mem_read (mem first, so that the job's
 * ref_opaque serves both) whose chunk hashes come from an index, as a
 * store's object gives them: whole leaves only. */
typedef struct ref_src {
	tu_mem mem;
	uint64_t lo, hi;       /* the chunk that changed */
	unsigned long hits;    /* updated atomically */
	unsigned long outside; /* reads not inside [lo, hi), atomically */
} ref_src;

static int ref_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	ref_src *x = opaque;
	if (off < x->lo || off + len > x->hi)
		__atomic_add_fetch(&x->outside, 1, __ATOMIC_RELAXED);
	return tu_mem_read(&x->mem, off, buf, len);
}

static int index_hash(void *opaque, uint64_t off, uint32_t len, uint64_t *h)
{
	ref_src *x = opaque;
	if (off % ULP_HASH_LEAF || off >= x->mem.size ||
	    (len != ULP_HASH_LEAF && off + len != x->mem.size))
		return 0;
	*h = XXH3_64bits(x->mem.p + off, len);
	__atomic_add_fetch(&x->hits, 1, __ATOMIC_RELAXED);
	return 1;
}

/* A job coding cur (n bytes) against rs's reference of the same size
 * (whose tree hash is ref_hash) into sink, hashes from the index. */
static void ref_job(ulp_encode_job *job, const uint8_t *cur, size_t n,
                    const uint8_t *ref_hash, ref_src *rs, tu_sink *sink)
{
	memset(job, 0, sizeof(*job));
	job->cur = cur;
	job->cur_size = n;
	job->has_ref = 1;
	job->ref_size = n;
	job->ref_hash = ref_hash;
	job->ref_read = ref_read;
	job->ref_opaque = rs;
	job->ref_chunk_hash = index_hash;
	job->write = tu_sink_write;
	job->write_opaque = sink;
}

/* The object in sink, coded against ref (n bytes), decodes to want. */
static void expect_decoded(const tu_sink *sink, const uint8_t *ref,
                           const uint8_t *want, size_t n)
{
	tu_mem om = tu_mem_of(sink->b.p, sink->b.len);
	tu_mem rm = tu_mem_of(ref, n);
	ulp_object *obj = NULL;
	TU_OK(ulp_object_open(tu_mem_read, &om, sink->b.len, &obj), "open");
	uint8_t *out = tu_xmalloc(n);
	ulp_dctx *d = ulp_dctx_new();
	TU_OK(ulp_object_read(d, obj, 0, out, n, tu_mem_read, &rm), "decode");
	TU_MEMEQ(out, want, n, "decoded bytes");
	ulp_dctx_free(d);
	ulp_object_close(obj);
	free(out);
}

/* A 4 KiB patch in the middle of a generic file of whole chunks plus a
 * tail: the chunks outside it are coded as identical and hashed from the
 * reference's index, read neither from the reference nor from cur (whose
 * bytes there are garbage, as a sparse copy-up's holes would be), and the
 * object's file hash is still the tree hash of the patched file. */
Test(hash, unchanged_chunks_hashed_from_the_index)
{
	const size_t n = 6 * ULP_HASH_LEAF + 12345,
		     patch = 3 * ULP_HASH_LEAF + 777;
	uint8_t *ref = tu_xmalloc(n), *want = tu_xmalloc(n), *cur;
	tu_rng r;
	tu_rng_init(&r, 5);
	tu_fill(&r, ref, n);
	memcpy(want, ref, n);
	tu_fill(&r, want + patch, 4096);
	cur = tu_xmalloc(n);
	memset(cur, 0xa5, n);
	memcpy(cur + 3 * ULP_HASH_LEAF, want + 3 * ULP_HASH_LEAF,
	       ULP_HASH_LEAF);
	uint64_t same[2][2] = { { 0, 3 * ULP_HASH_LEAF },
		                { 4 * ULP_HASH_LEAF, n } };
	uint8_t ref_hash[16], want_tree[16], want_flat[16], got[16];
	ulp_content_hash(ULP_HASH_TREE, ref, n, ref_hash);
	ulp_content_hash(ULP_HASH_TREE, want, n, want_tree);
	ulp_hash128(want, n, want_flat);
	ref_src rs = { tu_mem_of(ref, n), 3 * ULP_HASH_LEAF, 4 * ULP_HASH_LEAF,
		       0, 0 };
	for (int flat = 0; flat < 2; flat++) {
		const uint8_t *want_hash = flat ? want_flat : want_tree;
		for (unsigned threads = 1; threads <= 3; threads += 2) {
			ulp_encode_job job;
			tu_sink sink = { 0 };
			ref_job(&job, cur, n, ref_hash, &rs, &sink);
			job.same = (const uint64_t(*)[2])same;
			job.nsame = 2;
			job.nthreads = threads;
			job.flat_hash = flat;
			rs.outside = 0;
			rs.hits = 0;
			ulp_stats st;
			TU_OK(ulp_encode_file(&job, &st, got, NULL), "encode");
			/* (the chunk that changed is coded against the
			 * reference's bytes there; the flat hash needs every
			 * byte) */
			TU_ASSERT(flat ? rs.outside > 0 : rs.outside == 0,
			          "%lu reads of unchanged chunks, flat %d",
			          rs.outside, flat);
			TU_ASSERT(rs.hits == 6, "%lu index hits", rs.hits);
			TU_MEMEQ(got, want_hash, 16, "hash, flat %d", flat);
			TU_ASSERT(st.chunks_copy == 6, "%" PRIu64 " copies",
			          st.chunks_copy);
			tu_mem om = tu_mem_of(sink.b.p, sink.b.len);
			ulp_object *obj = NULL;
			TU_OK(ulp_object_open(tu_mem_read, &om, sink.b.len,
			                      &obj),
			      "open");
			TU_ASSERT(ulp_object_hash_kind(obj) ==
			                  (flat ? ULP_HASH_FLAT
			                        : ULP_HASH_TREE),
			          "kind");
			/* format 6 either way, the kind in header flag 2 */
			TU_ASSERT(sink.b.p[8] == 6 && sink.b.p[9] == 0 &&
			                  ((sink.b.p[10] & 2) != 0) == flat,
			          "header: format %u flags %u", sink.b.p[8],
			          sink.b.p[10]);
			TU_MEMEQ(ulp_object_file_hash(obj), want_hash, 16,
			         "file hash");
			ulp_object_close(obj);
			expect_decoded(&sink, ref, want, n);
			tu_buf_free(&sink.b);
		}
	}
	free(ref);
	free(want);
	free(cur);
}

/* Whole chunks of a reference copied at the same offsets after a hole
 * (a copy by reference into an empty file): the hole chunks are coded as
 * zeros, standalone, and the copied ones as identical with their hashes
 * from the index, so that nothing of the reference is read at all. */
Test(hash, hole_chunks_before_a_copy_read_no_reference)
{
	const size_t n = 5 * ULP_HASH_LEAF + 999, hole = 2 * ULP_HASH_LEAF;
	uint8_t *ref = tu_xmalloc(n), *want = tu_xmalloc(n);
	tu_rng r;
	tu_rng_init(&r, 9);
	tu_fill(&r, ref, n);
	memset(want, 0, hole);
	memcpy(want + hole, ref + hole, n - hole);
	/* cur's bytes are garbage everywhere, as a sparse copy-up's are */
	uint8_t *cur = tu_xmalloc(n);
	memset(cur, 0x5a, n);
	uint64_t holes[1][2] = { { 0, hole } }, same[1][2] = { { hole, n } };
	uint8_t ref_hash[16], want_hash[16], got[16];
	ulp_content_hash(ULP_HASH_TREE, ref, n, ref_hash);
	ulp_content_hash(ULP_HASH_TREE, want, n, want_hash);
	ref_src rs = { tu_mem_of(ref, n), 0, 0, 0, 0 };
	ulp_encode_job job;
	tu_sink sink = { 0 };
	ref_job(&job, cur, n, ref_hash, &rs, &sink);
	job.holes = (const uint64_t(*)[2])holes;
	job.nholes = 1;
	job.same = (const uint64_t(*)[2])same;
	job.nsame = 1;
	job.nthreads = 2;
	ulp_stats st;
	TU_OK(ulp_encode_file(&job, &st, got, NULL), "encode");
	TU_ASSERT(rs.outside == 0, "%lu reads of the reference", rs.outside);
	TU_ASSERT(st.chunks_copy == 4, "%" PRIu64 " copies", st.chunks_copy);
	TU_MEMEQ(got, want_hash, 16, "hash");
	expect_decoded(&sink, ref, want, n);
	tu_buf_free(&sink.b);
	free(ref);
	free(want);
	free(cur);
}
