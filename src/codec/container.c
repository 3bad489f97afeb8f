/*
 * container.c - the object file: header, chunk payloads, index, trailer.
 *
 *   header  (48)  magic "ULPFSOB1", u16 format, u16 flags (has a
 *                 reference; from format 4 also the flat hash kind and
 *                 has a side), u32 zero,
 *                 u64 ref_size, ref_hash[16], u64 XXH3-64 of bytes 0..39
 *   side    (40)  only with ULP_OBJ_FLAG_HAS_SIDE: u64 side_size,
 *                 side_hash[16], u64 zero, u64 XXH3-64 of bytes 0..31
 *   payloads      the encoded chunks, back to back
 *   index         per chunk (32): u32 len, u32 stored_len, u32 flags,
 *                 u32 zero, u64 XXH3-64 of the logical bytes,
 *                 u64 XXH3-64 of the payload
 *   trailer (64)  u64 logical size, u64 chunk count, u64 index offset,
 *                 file_hash[16] (content hash of the logical bytes: the
 *                 tree hash from format 3 unless the header's flag says
 *                 the XXH3-128, the XXH3-128 before),
 *                 u64 XXH3-64 of the index, "ULPFSEND",
 *                 u64 XXH3-64 of trailer bytes 0..55
 *
 * The index sits at the end so that an object can be streamed to a pipe.
 * Every byte of an object is under some checksum, so any corruption is
 * found when the object is opened or when the chunk it hits is decoded.
 */
#include <stdlib.h>

#include "hash.h"
#include "codec_internal.h"

struct ulp_writer {
	ulp_write_fn write;
	void *opaque;
	uint64_t pos;     /* bytes written so far */
	uint64_t logical; /* logical bytes covered so far */
	ulp_buf index;
	size_t nchunks;
	int failed;
	int finished;
	int has_ref;
	int has_side;
};

static int w_out(ulp_writer *w, const void *p, size_t n)
{
	int rc = w->write(w->opaque, p, n);
	if (rc) {
		w->failed = 1;
		return rc < 0 ? rc : ULP_ERR_IO;
	}
	w->pos += n;
	return ULP_OK;
}

int ulp_writer_new(ulp_write_fn write, void *opaque, const uint8_t *ref_hash,
                   uint64_t ref_size, ulp_writer **out)
{
	return ulp_writer_new_kind(write, opaque, ref_hash, ref_size,
	                           ULP_HASH_TREE, out);
}

int ulp_writer_new_kind(ulp_write_fn write, void *opaque,
                        const uint8_t *ref_hash, uint64_t ref_size,
                        int hash_kind, ulp_writer **out)
{
	return ulp_writer_new_side(write, opaque, ref_hash, ref_size, NULL, 0,
	                           hash_kind, out);
}

int ulp_writer_new_side(ulp_write_fn write, void *opaque,
                        const uint8_t *ref_hash, uint64_t ref_size,
                        const uint8_t *side_hash, uint64_t side_size,
                        int hash_kind, ulp_writer **out)
{
	uint8_t h[ULP_OBJ_HEADER_SIZE + ULP_OBJ_SIDE_SIZE] = { 0 };
	size_t hlen = ULP_OBJ_HEADER_SIZE;
	ulp_writer *w;
	int rc;
	if (!write || !out ||
	    (hash_kind != ULP_HASH_TREE && hash_kind != ULP_HASH_FLAT))
		return ULP_ERR_ARG;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ULP_ERR_NOMEM;
	w->write = write;
	w->opaque = opaque;
	w->has_ref = ref_hash != NULL;
	w->has_side = side_hash != NULL;
	memcpy(h, ULP_OBJ_MAGIC, 8);
	ulp_put16(h + 8, ULP_OBJ_FORMAT);
	ulp_put16(h + 10,
	          (ref_hash ? ULP_OBJ_FLAG_HAS_REF : 0) |
	                  (hash_kind == ULP_HASH_FLAT ? ULP_OBJ_FLAG_FLAT_HASH
	                                              : 0) |
	                  (side_hash ? ULP_OBJ_FLAG_HAS_SIDE : 0));
	if (ref_hash) {
		ulp_put64(h + 16, ref_size);
		memcpy(h + 24, ref_hash, 16);
	}
	ulp_put64(h + 40, XXH3_64bits(h, 40));
	if (side_hash) {
		uint8_t *sd = h + ULP_OBJ_HEADER_SIZE;
		ulp_put64(sd, side_size);
		memcpy(sd + 8, side_hash, 16);
		ulp_put64(sd + 32, XXH3_64bits(sd, 32));
		hlen += ULP_OBJ_SIDE_SIZE;
	}
	rc = w_out(w, h, hlen);
	if (rc) {
		free(w);
		return rc;
	}
	*out = w;
	return ULP_OK;
}

int ulp_writer_add_chunk(ulp_writer *w, uint64_t off, uint32_t len,
                         const void *enc, size_t enc_len, uint64_t decoded_xxh3)
{
	return ulp_writer_add_chunk_hashed(w, off, len, enc, enc_len,
	                                   decoded_xxh3,
	                                   XXH3_64bits(enc, enc_len));
}

int ulp_writer_add_chunk_hashed(ulp_writer *w, uint64_t off, uint32_t len,
                                const void *enc, size_t enc_len,
                                uint64_t decoded_xxh3, uint64_t enc_xxh3)
{
	uint8_t e[ULP_OBJ_INDEX_ENTRY] = { 0 };
	int needs, needs_side, rc;
	if (w->failed)
		return ULP_ERR_IO;
	if (w->finished || off != w->logical || len == 0 ||
	    enc_len > UINT32_MAX)
		return ULP_ERR_ARG;
	rc = ulp_chunk_needs_ref(enc, enc_len, &needs, &needs_side);
	if (rc || (needs && !w->has_ref) || (needs_side && !w->has_side))
		return ULP_ERR_ARG;
	ulp_put32(e, len);
	ulp_put32(e + 4, (uint32_t)enc_len);
	ulp_put32(e + 8, (needs ? ULP_IDX_FLAG_NEEDS_REF : 0) |
	                         (needs_side ? ULP_IDX_FLAG_NEEDS_SIDE : 0));
	ulp_put64(e + 16, decoded_xxh3);
	ulp_put64(e + 24, enc_xxh3);
	if (ulp_buf_reserve(&w->index, w->index.len + sizeof(e)))
		return ULP_ERR_NOMEM;
	rc = w_out(w, enc, enc_len);
	if (rc)
		return rc;
	memcpy(w->index.p + w->index.len, e, sizeof(e));
	w->index.len += sizeof(e);
	w->nchunks++;
	w->logical += len;
	return ULP_OK;
}

int ulp_writer_finish(ulp_writer *w, const uint8_t file_hash[16],
                      uint64_t *total)
{
	uint8_t t[ULP_OBJ_TRAILER_SIZE];
	uint64_t index_off = w->pos;
	int rc;
	if (w->failed)
		return ULP_ERR_IO;
	if (w->finished)
		return ULP_ERR_ARG;
	w->finished = 1;
	if (w->index.len) {
		rc = w_out(w, w->index.p, w->index.len);
		if (rc)
			return rc;
	}
	ulp_put64(t, w->logical);
	ulp_put64(t + 8, w->nchunks);
	ulp_put64(t + 16, index_off);
	memcpy(t + 24, file_hash, 16);
	ulp_put64(t + 40, XXH3_64bits(w->index.p, w->index.len));
	memcpy(t + 48, ULP_OBJ_END_MAGIC, 8);
	ulp_put64(t + 56, XXH3_64bits(t, 56));
	rc = w_out(w, t, sizeof(t));
	if (rc)
		return rc;
	if (total)
		*total = w->pos;
	return ULP_OK;
}

void ulp_writer_free(ulp_writer *w)
{
	if (!w)
		return;
	ulp_buf_free(&w->index);
	free(w);
}

/* ------------------------------------------------------------ reading */

static int read_exact(const ulp_object *o, uint64_t off, void *buf, size_t len)
{
	int rc = o->read_at(o->opaque, off, buf, len);
	return rc ? (rc < 0 ? rc : ULP_ERR_IO) : ULP_OK;
}

static int parse_header(ulp_object *o)
{
	uint8_t h[ULP_OBJ_HEADER_SIZE];
	int rc = read_exact(o, 0, h, sizeof(h));
	if (rc)
		return rc;
	if (memcmp(h, ULP_OBJ_MAGIC, 7) != 0)
		return ULP_ERR_CORRUPT;
	if (XXH3_64bits(h, 40) != ulp_le64(h + 40))
		return ULP_ERR_CORRUPT;
	/* The magic's last byte and the format number both version the
	 * object; a checksummed header with a newer one is not corrupt. */
	if (h[7] != ULP_OBJ_MAGIC[7] || ulp_le16(h + 8) > ULP_OBJ_FORMAT ||
	    ulp_le16(h + 8) < ULP_OBJ_FORMAT_MIN)
		return ULP_ERR_VERSION;
	o->format = ulp_le16(h + 8);
	uint16_t flags = ulp_le16(h + 10);
	uint16_t known =
		ULP_OBJ_FLAG_HAS_REF |
		(o->format >= 4 ? ULP_OBJ_FLAG_FLAT_HASH | ULP_OBJ_FLAG_HAS_SIDE
	                        : 0);
	if ((flags & ~known) || ulp_le32(h + 12))
		return ULP_ERR_VERSION;
	o->has_ref = flags & ULP_OBJ_FLAG_HAS_REF;
	o->flat_hash = (flags & ULP_OBJ_FLAG_FLAT_HASH) != 0;
	o->ref_size = ulp_le64(h + 16);
	memcpy(o->ref_hash, h + 24, 16);
	o->payload_off = ULP_OBJ_HEADER_SIZE;
	if (!(flags & ULP_OBJ_FLAG_HAS_SIDE))
		return ULP_OK;
	uint8_t sd[ULP_OBJ_SIDE_SIZE];
	if (o->obj_size <
	    ULP_OBJ_HEADER_SIZE + ULP_OBJ_SIDE_SIZE + ULP_OBJ_TRAILER_SIZE)
		return ULP_ERR_CORRUPT;
	rc = read_exact(o, ULP_OBJ_HEADER_SIZE, sd, sizeof(sd));
	if (rc)
		return rc;
	if (XXH3_64bits(sd, 32) != ulp_le64(sd + 32) || ulp_le64(sd + 24))
		return ULP_ERR_CORRUPT;
	o->has_side = 1;
	o->side_size = ulp_le64(sd);
	memcpy(o->side_hash, sd + 8, 16);
	o->payload_off += ULP_OBJ_SIDE_SIZE;
	return ULP_OK;
}

static int parse_index(ulp_object *o, const uint8_t *idx, uint64_t index_off)
{
	uint64_t stored = o->payload_off, logical = 0;
	const uint32_t known = ULP_IDX_FLAG_NEEDS_REF | ULP_IDX_FLAG_NEEDS_SIDE;
	for (size_t i = 0; i < o->nchunks; i++) {
		const uint8_t *e = idx + i * ULP_OBJ_INDEX_ENTRY;
		ulp_obj_chunk *c = &o->chunks[i];
		c->len = ulp_le32(e);
		c->stored_len = ulp_le32(e + 4);
		c->flags = ulp_le32(e + 8);
		c->dec_hash = ulp_le64(e + 16);
		c->pay_hash = ulp_le64(e + 24);
		c->off = logical;
		c->stored_off = stored;
		if (c->len == 0 || c->len > ULP_CHUNK_SIZE_MAX ||
		    (c->flags & ~known) || ulp_le32(e + 12))
			return ULP_ERR_CORRUPT;
		if (((c->flags & ULP_IDX_FLAG_NEEDS_REF) && !o->has_ref) ||
		    ((c->flags & ULP_IDX_FLAG_NEEDS_SIDE) && !o->has_side))
			return ULP_ERR_CORRUPT;
		logical += c->len;
		stored += c->stored_len;
		if (c->len > o->max_len)
			o->max_len = c->len;
	}
	if (logical != o->size || stored != index_off)
		return ULP_ERR_CORRUPT;
	return ULP_OK;
}

static int mem_read_at(void *opaque, uint64_t off, void *buf, size_t len)
{
	const ulp_object *o = opaque;
	if (off > o->obj_size || len > o->obj_size - off)
		return ULP_ERR_CORRUPT;
	memcpy(buf, o->mem + off, len);
	return ULP_OK;
}

/* mem, when not NULL, holds the object's obj_size bytes: read_at then
 * reads them with the object itself as its opaque. */
static int object_open(ulp_read_at_fn read_at, void *opaque, const uint8_t *mem,
                       uint64_t obj_size, ulp_object **out)
{
	uint8_t t[ULP_OBJ_TRAILER_SIZE];
	uint8_t *idx = NULL;
	ulp_object *o;
	int rc;

	if (!read_at || !out)
		return ULP_ERR_ARG;
	*out = NULL;
	if (obj_size < ULP_OBJ_HEADER_SIZE + ULP_OBJ_TRAILER_SIZE)
		return ULP_ERR_CORRUPT;
	o = calloc(1, sizeof(*o));
	if (!o)
		return ULP_ERR_NOMEM;
	o->read_at = read_at;
	o->opaque = mem ? o : opaque;
	o->mem = mem;
	o->obj_size = obj_size;
	rc = parse_header(o);
	if (rc)
		goto fail;
	rc = read_exact(o, obj_size - sizeof(t), t, sizeof(t));
	if (rc)
		goto fail;
	rc = ULP_ERR_CORRUPT;
	if (memcmp(t + 48, ULP_OBJ_END_MAGIC, 8) != 0 ||
	    XXH3_64bits(t, 56) != ulp_le64(t + 56))
		goto fail;
	o->size = ulp_le64(t);
	uint64_t n = ulp_le64(t + 8), index_off = ulp_le64(t + 16);
	memcpy(o->file_hash, t + 24, 16);
	uint64_t index_room = obj_size - sizeof(t) - o->payload_off;
	if (n > index_room / ULP_OBJ_INDEX_ENTRY ||
	    index_off != obj_size - sizeof(t) - n * ULP_OBJ_INDEX_ENTRY)
		goto fail;
	o->nchunks = (size_t)n;
	idx = malloc(n * ULP_OBJ_INDEX_ENTRY + 1);
	o->chunks = calloc(n + 1, sizeof(ulp_obj_chunk));
	if (!idx || !o->chunks) {
		rc = ULP_ERR_NOMEM;
		goto fail;
	}
	rc = read_exact(o, index_off, idx, n * ULP_OBJ_INDEX_ENTRY);
	if (rc)
		goto fail;
	rc = ULP_ERR_CORRUPT;
	if (XXH3_64bits(idx, n * ULP_OBJ_INDEX_ENTRY) != ulp_le64(t + 40))
		goto fail;
	rc = parse_index(o, idx, index_off);
	if (rc)
		goto fail;
	free(idx);
	*out = o;
	return ULP_OK;
fail:
	free(idx);
	ulp_object_close(o);
	return rc;
}

int ulp_object_open(ulp_read_at_fn read_at, void *opaque, uint64_t obj_size,
                    ulp_object **out)
{
	return object_open(read_at, opaque, NULL, obj_size, out);
}

int ulp_object_open_mem(const void *data, uint64_t size, ulp_object **out)
{
	if (!data)
		return ULP_ERR_ARG;
	return object_open(mem_read_at, NULL, data, size, out);
}

void ulp_object_close(ulp_object *o)
{
	if (!o)
		return;
	free(o->chunks);
	free(o);
}

uint64_t ulp_object_size(const ulp_object *o)
{
	return o->size;
}

size_t ulp_object_chunk_count(const ulp_object *o)
{
	return o->nchunks;
}

int ulp_object_has_ref(const ulp_object *o)
{
	return o->has_ref;
}

uint64_t ulp_object_ref_size(const ulp_object *o)
{
	return o->ref_size;
}

const uint8_t *ulp_object_ref_hash(const ulp_object *o)
{
	return o->ref_hash;
}

const uint8_t *ulp_object_file_hash(const ulp_object *o)
{
	return o->file_hash;
}

int ulp_object_hash_kind(const ulp_object *o)
{
	return o->format >= 3 && !o->flat_hash ? ULP_HASH_TREE : ULP_HASH_FLAT;
}

void ulp_object_chunk_range(const ulp_object *o, size_t i, uint64_t *off,
                            uint32_t *len)
{
	assert(i < o->nchunks);
	*off = o->chunks[i].off;
	*len = o->chunks[i].len;
}

uint32_t ulp_object_chunk_stored(const ulp_object *o, size_t i)
{
	assert(i < o->nchunks);
	return o->chunks[i].stored_len;
}

uint64_t ulp_object_chunk_hash(const ulp_object *o, size_t i)
{
	assert(i < o->nchunks);
	return o->chunks[i].dec_hash;
}

size_t ulp_object_chunk_at(const ulp_object *o, uint64_t off)
{
	size_t lo = 0, hi = o->nchunks;
	assert(off < o->size);
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->chunks[mid].off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

int ulp_object_chunk_needs_ref(const ulp_object *o, size_t i)
{
	assert(i < o->nchunks);
	return (o->chunks[i].flags & ULP_IDX_FLAG_NEEDS_REF) != 0;
}

int ulp_object_has_side(const ulp_object *o)
{
	return o->has_side;
}

uint64_t ulp_object_side_size(const ulp_object *o)
{
	return o->side_size;
}

const uint8_t *ulp_object_side_hash(const ulp_object *o)
{
	return o->side_hash;
}

int ulp_object_chunk_needs_side(const ulp_object *o, size_t i)
{
	assert(i < o->nchunks);
	return (o->chunks[i].flags & ULP_IDX_FLAG_NEEDS_SIDE) != 0;
}

int ulp_object_read(ulp_dctx *d, const ulp_object *o, uint64_t off, void *dst,
                    size_t len, ulp_ref_read_fn ref_read, void *ref_opaque)
{
	const ulp_refs refs = { .ref_read = ref_read,
		                .ref_opaque = ref_opaque };
	return ulp_object_read_refs(d, o, off, dst, len, &refs);
}

int ulp_object_read_refs(ulp_dctx *d, const ulp_object *o, uint64_t off,
                         void *dst, size_t len, const ulp_refs *refs)
{
	uint8_t *out = dst;
	uint8_t *tmp = NULL;
	int rc = ULP_OK;
	if (!d || !o || (len && !dst) || off > o->size || len > o->size - off)
		return ULP_ERR_ARG;
	while (len > 0 && !rc) {
		size_t i = ulp_object_chunk_at(o, off);
		const ulp_obj_chunk *c = &o->chunks[i];
		uint64_t in = off - c->off;
		size_t take = c->len - in < len ? (size_t)(c->len - in) : len;
		if (in == 0 && take == c->len) {
			rc = ulp_chunk_decode_refs(d, o, i, refs, out);
		} else {
			if (!tmp && !(tmp = malloc(o->max_len)))
				return ULP_ERR_NOMEM;
			rc = ulp_chunk_decode_refs(d, o, i, refs, tmp);
			if (!rc)
				memcpy(out, tmp + in, take);
		}
		out += take;
		off += take;
		len -= take;
	}
	free(tmp);
	return rc;
}
