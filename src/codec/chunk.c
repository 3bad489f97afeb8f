/*
 * chunk.c - encoding and decoding of one chunk.
 *
 * A chunk is a list of runs followed by streams, each gathering some runs:
 * stream 0 holds every generic run (zstd, with the reference bytes of
 * those runs as a prefix); every large float run has a stream of its own
 * (its own tables, and its own choice of delta or standalone coding: Adam's
 * two moments sit side by side in a chunk and want different codings);
 * small float runs share one stream per (dtype, with/without reference),
 * so that many small tensors share one set of tables.  The assignment is
 * a function of the runs list, which the decoder reads first.
 *
 * Payload: [ULP_CHUNK_RUNS][varint nruns]
 *          nruns x ([varint len][u8 dtype | has_ref << 7][varint ref_off])
 *          per present stream, in id order: [varint stream_len][stream]
 */
#include <stdlib.h>

#include <zstd.h>

#include "hash.h"
#include "codec_internal.h"
#include "floatcode.h"

#define NCLASS (1 + 2 * (ULP_DT_COUNT - 1))
/* Float runs of at least this many elements get a stream of their own. */
#define OWN_STREAM_ELEMS (64u << 10)
#define ULP_ZSTD_WINDOWLOG_MAX 27

static unsigned run_class(const ulp_run *r)
{
	if (r->dtype == ULP_DT_GENERIC)
		return 0;
	return 1 + 2 * (r->dtype - 1u) + (r->has_ref ? 0u : 1u);
}

/* Reference bytes a run contributes: float runs their whole length,
 * generic runs what the reference still has at ref_off. */
static uint64_t run_ref_len(const ulp_run *r, uint64_t ref_size)
{
	if (!r->has_ref)
		return 0;
	if (r->dtype != ULP_DT_GENERIC)
		return r->len;
	uint64_t avail = ref_size - r->ref_off;
	return r->len < avail ? r->len : avail;
}

/* Stream id of every run (see the top of this file); returns the number
 * of stream ids, some of which (0 without generic runs) may be empty. */
static uint32_t assign_streams(const ulp_run *runs, size_t n, uint32_t *sid)
{
	uint32_t next = 1, small[NCLASS] = { 0 };
	for (size_t i = 0; i < n; i++) {
		const ulp_run *r = &runs[i];
		sid[i] = 0;
		if (r->dtype &&
		    r->len / ulp_dtype_size(r->dtype) >= OWN_STREAM_ELEMS)
			sid[i] = next++;
	}
	for (size_t i = 0; i < n; i++) {
		const ulp_run *r = &runs[i];
		if (!r->dtype || sid[i])
			continue;
		unsigned cls = run_class(r);
		if (!small[cls])
			small[cls] = next++;
		sid[i] = small[cls];
	}
	return next;
}

/* The first of n runs in stream id (n when the stream is empty). */
static size_t first_run(const uint32_t *sid, size_t n, uint32_t id)
{
	size_t first = 0;
	while (first < n && sid[first] != id)
		first++;
	return first;
}

typedef struct chunk_scratch {
	ulp_float_scratch *fs;
	ulp_buf cur;    /* gathered logical bytes of one class */
	ulp_buf ref;    /* gathered reference bytes of one class */
	ulp_buf stream; /* one encoded or decoded stream */
	ulp_run *runs;  /* decoder: parsed runs */
	size_t runs_cap;
	uint32_t *sid; /* stream id of each run */
	size_t sid_cap;
} chunk_scratch;

struct ulp_cctx {
	chunk_scratch s;
	ZSTD_CCtx *zc;
	ulp_buf out;
};

struct ulp_dctx {
	chunk_scratch s;
	ZSTD_DCtx *zd;
	ulp_buf in;
};

static int scratch_init(chunk_scratch *s)
{
	memset(s, 0, sizeof(*s));
	s->fs = ulp_float_scratch_new();
	return s->fs ? ULP_OK : ULP_ERR_NOMEM;
}

static void scratch_fini(chunk_scratch *s)
{
	ulp_float_scratch_free(s->fs);
	ulp_buf_free(&s->cur);
	ulp_buf_free(&s->ref);
	ulp_buf_free(&s->stream);
	free(s->runs);
	free(s->sid);
}

static int sid_reserve(chunk_scratch *s, size_t n)
{
	if (s->sid_cap >= n && s->sid)
		return ULP_OK;
	free(s->sid);
	s->sid = malloc(sizeof(uint32_t) * (n ? n : 1));
	s->sid_cap = s->sid ? n : 0;
	return s->sid ? ULP_OK : ULP_ERR_NOMEM;
}

ulp_cctx *ulp_cctx_new(void)
{
	ulp_cctx *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (scratch_init(&c->s) || !(c->zc = ZSTD_createCCtx())) {
		ulp_cctx_free(c);
		return NULL;
	}
	return c;
}

void ulp_cctx_free(ulp_cctx *c)
{
	if (!c)
		return;
	scratch_fini(&c->s);
	ZSTD_freeCCtx(c->zc);
	ulp_buf_free(&c->out);
	free(c);
}

ulp_dctx *ulp_dctx_new(void)
{
	ulp_dctx *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	if (scratch_init(&d->s) || !(d->zd = ZSTD_createDCtx())) {
		ulp_dctx_free(d);
		return NULL;
	}
	return d;
}

void ulp_dctx_free(ulp_dctx *d)
{
	if (!d)
		return;
	scratch_fini(&d->s);
	ZSTD_freeDCtx(d->zd);
	ulp_buf_free(&d->in);
	free(d);
}

/* Gather the logical bytes (from src, relative to the chunk start) and the
 * reference bytes of every run of stream id. */
static int gather(chunk_scratch *s, const ulp_run *runs, size_t nruns,
                  uint32_t id, const uint8_t *src, uint64_t ref_size,
                  ulp_ref_read_fn ref_read, void *ref_opaque)
{
	uint64_t pos = 0;
	int rc;
	s->cur.len = s->ref.len = 0;
	for (size_t i = 0; i < nruns; i++) {
		const ulp_run *r = &runs[i];
		if (s->sid[i] == id) {
			uint64_t rl = run_ref_len(r, ref_size);
			if (src) {
				if (ulp_buf_reserve(&s->cur,
				                    s->cur.len + r->len))
					return ULP_ERR_NOMEM;
				memcpy(s->cur.p + s->cur.len, src + pos,
				       r->len);
				s->cur.len += r->len;
			}
			if (rl) {
				if (!ref_read)
					return ULP_ERR_REF;
				if (ulp_buf_reserve(&s->ref, s->ref.len + rl))
					return ULP_ERR_NOMEM;
				rc = ref_read(ref_opaque, r->ref_off,
				              s->ref.p + s->ref.len, rl);
				if (rc)
					return rc < 0 ? rc : ULP_ERR_IO;
				s->ref.len += rl;
			}
		}
		pos += r->len;
	}
	return ULP_OK;
}

/* Copy a stream's contiguous decoded bytes back to its runs in dst. */
static void scatter(const chunk_scratch *s, const ulp_run *runs, size_t nruns,
                    uint32_t id, const uint8_t *from, uint8_t *dst)
{
	uint64_t pos = 0;
	for (size_t i = 0; i < nruns; i++) {
		if (s->sid[i] == id) {
			memcpy(dst + pos, from, runs[i].len);
			from += runs[i].len;
		}
		pos += runs[i].len;
	}
}

static int zstd_level(const ulp_params *p, size_t len)
{
	if (p->generic_level)
		return p->generic_level;
	return len <= (128u << 10) ? 19 : len <= (1u << 20) ? 9 : 3;
}

static unsigned window_log(size_t total)
{
	unsigned wl = 10;
	while (wl < ULP_ZSTD_WINDOWLOG_MAX && ((size_t)1 << wl) < total)
		wl++;
	return wl;
}

static int generic_encode(ulp_cctx *c, const ulp_params *p, const uint8_t *cur,
                          size_t n, ulp_buf *out)
{
	chunk_scratch *s = &c->s;
	if (s->ref.len == n && memcmp(cur, s->ref.p, n) == 0) {
		if (ulp_buf_reserve(out, out->len + 1))
			return ULP_ERR_NOMEM;
		out->p[out->len++] = ULP_SC_IDENTICAL;
		return ULP_OK;
	}
	size_t bound = ZSTD_compressBound(n);
	if (ulp_buf_reserve(out, out->len + 1 + (bound > n ? bound : n)))
		return ULP_ERR_NOMEM;
	uint8_t *dst = out->p + out->len;
	ZSTD_CCtx_reset(c->zc, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel,
	                       zstd_level(p, n));
	ZSTD_CCtx_setParameter(c->zc, ZSTD_c_windowLog,
	                       (int)window_log(n + s->ref.len));
	if (s->ref.len)
		ZSTD_CCtx_refPrefix(c->zc, s->ref.p, s->ref.len);
	size_t z = ZSTD_compress2(c->zc, dst + 1, bound, cur, n);
	if (!ZSTD_isError(z) && z < n) {
		dst[0] = ULP_SC_ZSTD;
		out->len += 1 + z;
	} else {
		dst[0] = ULP_SC_RAW;
		memcpy(dst + 1, cur, n);
		out->len += 1 + n;
	}
	return ULP_OK;
}

static int generic_decode(ulp_dctx *d, const uint8_t *in, size_t len,
                          uint8_t *dst, size_t n)
{
	chunk_scratch *s = &d->s;
	if (len < 1)
		return ULP_ERR_CORRUPT;
	switch (in[0]) {
	case ULP_SC_IDENTICAL:
		if (len != 1 || s->ref.len != n)
			return ULP_ERR_CORRUPT;
		memcpy(dst, s->ref.p, n);
		return ULP_OK;
	case ULP_SC_RAW:
		if (len != 1 + n)
			return ULP_ERR_CORRUPT;
		memcpy(dst, in + 1, n);
		return ULP_OK;
	case ULP_SC_ZSTD:
		break;
	default:
		return ULP_ERR_CORRUPT;
	}
	ZSTD_DCtx_reset(d->zd, ZSTD_reset_session_and_parameters);
	ZSTD_DCtx_setParameter(d->zd, ZSTD_d_windowLogMax,
	                       ULP_ZSTD_WINDOWLOG_MAX);
	if (s->ref.len)
		ZSTD_DCtx_refPrefix(d->zd, s->ref.p, s->ref.len);
	size_t z = ZSTD_decompressDCtx(d->zd, dst, n, in + 1, len - 1);
	return !ZSTD_isError(z) && z == n ? ULP_OK : ULP_ERR_CORRUPT;
}

static void put_runs(ulp_buf *out, const ulp_run *runs, size_t nruns)
{
	uint8_t *p = out->p + out->len;
	size_t n = 0;
	p[n++] = ULP_CHUNK_RUNS;
	n += ulp_varint_put(p + n, nruns);
	for (size_t i = 0; i < nruns; i++) {
		n += ulp_varint_put(p + n, runs[i].len);
		p[n++] = (uint8_t)(runs[i].dtype | (runs[i].has_ref << 7));
		if (runs[i].has_ref)
			n += ulp_varint_put(p + n, runs[i].ref_off);
	}
	out->len += n;
}

int ulp_chunk_encode(ulp_cctx *c, const ulp_plan *plan, size_t i,
                     const void *src, ulp_ref_read_fn ref_read,
                     void *ref_opaque, const void **out, size_t *out_len,
                     ulp_stats *stats)
{
	const ulp_chunk_plan *cp;
	const ulp_run *runs;
	ulp_stats local;
	ulp_buf *o = &c->out;
	int rc, any_delta = 0, all_same = 1;

	if (!plan || i >= plan->nchunks || !src || !out || !out_len)
		return ULP_ERR_ARG;
	cp = &plan->chunks[i];
	runs = plan->runs + cp->first_run;
	memset(&local, 0, sizeof(local));
	o->len = 0;
	if (ulp_buf_reserve(o, 2 + ULP_VARINT_MAX +
	                               (size_t)cp->nruns *
	                                       (1 + 2 * ULP_VARINT_MAX)))
		return ULP_ERR_NOMEM;
	put_runs(o, runs, cp->nruns);

	if (sid_reserve(&c->s, cp->nruns))
		return ULP_ERR_NOMEM;
	uint32_t nstreams = assign_streams(runs, cp->nruns, c->s.sid);
	for (uint32_t id = 0; id < nstreams; id++) {
		size_t first = first_run(c->s.sid, cp->nruns, id);
		if (first == cp->nruns)
			continue;
		ulp_dtype dt = (ulp_dtype)runs[first].dtype;
		/* A stream of one run is coded straight from src: only
		 * streams that gather several runs need a copy. */
		size_t nin = 0;
		uint64_t first_pos = 0;
		for (size_t r = 0; r < cp->nruns; r++) {
			if (r < first)
				first_pos += runs[r].len;
			nin += c->s.sid[r] == id;
		}
		rc = gather(&c->s, runs, cp->nruns, id, nin > 1 ? src : NULL,
		            plan->ref_size, ref_read, ref_opaque);
		if (rc)
			return rc;
		const uint8_t *cur = nin > 1 ? c->s.cur.p
		                             : (const uint8_t *)src + first_pos;
		size_t curlen = nin > 1 ? c->s.cur.len : runs[first].len;
		/* coded in place behind its length (see ulp_buf_open_gap) */
		size_t start = o->len, gap;
		if (id == 0) {
			size_t zb = ZSTD_compressBound(curlen);
			gap = ulp_buf_open_gap(o,
			                       1 + (zb > curlen ? zb : curlen));
			if (!gap)
				return ULP_ERR_NOMEM;
			rc = generic_encode(c, &plan->params, cur, curlen, o);
			size_t len = o->len - start - gap;
			local.dt[0].bytes_in += curlen;
			local.dt[0].bytes_out += len;
			local.dt[0].model_bits += 8.0 * (len - 1);
		} else {
			ulp_float_fmt f = ulp_dtype_fmt(dt);
			size_t n = curlen / (f.width / 8);
			size_t bound = ulp_float_bound(n, f.width);
			gap = ulp_buf_open_gap(o, bound);
			if (!gap || ulp_buf_reserve(o, o->len + bound))
				return ULP_ERR_NOMEM;
			rc = ulp_float_encode(c->s.fs, f, cur,
			                      c->s.ref.len ? c->s.ref.p : NULL,
			                      n, plan->params.model_stats, o,
			                      &local.dt[dt]);
		}
		if (rc)
			return rc;
		any_delta |= o->p[start + gap] == ULP_SC_DELTA;
		all_same &= o->p[start + gap] == ULP_SC_IDENTICAL;
		rc = ulp_buf_close_gap(o, start, gap);
		if (rc)
			return rc;
	}
	if (all_same)
		local.chunks_copy = 1;
	else if (any_delta)
		local.chunks_delta = 1;
	else
		local.chunks_standalone = 1;
	if (stats)
		*stats = local;
	*out = o->p;
	*out_len = o->len;
	return ULP_OK;
}

int ulp_chunk_encode_copy(ulp_cctx *c, const ulp_plan *plan, size_t i,
                          const void **out, size_t *out_len, ulp_stats *stats)
{
	if (!plan || i >= plan->nchunks || !out || !out_len)
		return ULP_ERR_ARG;
	const ulp_chunk_plan *cp = &plan->chunks[i];
	const ulp_run *runs = plan->runs + cp->first_run;
	ulp_buf *o = &c->out;
	ulp_stats local;
	uint64_t pos = cp->off;

	/* Identical only where every run is coded against the same bytes
	 * of the reference, all of them there. */
	for (size_t r = 0; r < cp->nruns; pos += runs[r++].len)
		if (!runs[r].has_ref || runs[r].ref_off != pos ||
		    runs[r].len > plan->ref_size - pos || pos > plan->ref_size)
			return ULP_ERR_REF;
	if (sid_reserve(&c->s, cp->nruns))
		return ULP_ERR_NOMEM;
	uint32_t nstreams = assign_streams(runs, cp->nruns, c->s.sid);
	o->len = 0;
	if (ulp_buf_reserve(o, 2 + ULP_VARINT_MAX +
	                               (size_t)cp->nruns *
	                                       (1 + 2 * ULP_VARINT_MAX) +
	                               2 * (size_t)nstreams))
		return ULP_ERR_NOMEM;
	put_runs(o, runs, cp->nruns);
	memset(&local, 0, sizeof(local));
	for (uint32_t id = 0; id < nstreams; id++) {
		size_t first = first_run(c->s.sid, cp->nruns, id);
		if (first == cp->nruns)
			continue;
		o->len += ulp_varint_put(o->p + o->len, 1);
		o->p[o->len++] = ULP_SC_IDENTICAL;
		local.dt[runs[first].dtype].bytes_out += 2;
	}
	for (size_t r = 0; r < cp->nruns; r++) {
		ulp_dtype_stats *d = &local.dt[runs[r].dtype];
		d->bytes_in += runs[r].len;
		if (runs[r].dtype) {
			uint64_t n =
				runs[r].len / ulp_dtype_size(runs[r].dtype);
			d->elems += n;
			d->delta_elems += n;
			d->ref_elems += n;
		}
	}
	local.chunks_copy = 1;
	if (stats)
		*stats = local;
	*out = o->p;
	*out_len = o->len;
	return ULP_OK;
}

/* Parse and validate the runs list of a chunk of logical length len. */
static int parse_runs(chunk_scratch *s, const uint8_t **pp, const uint8_t *end,
                      const ulp_object *obj, uint32_t len, size_t *nruns_out)
{
	uint64_t nruns, total = 0;
	const uint8_t *p = *pp;
	if (p >= end || *p++ != ULP_CHUNK_RUNS)
		return ULP_ERR_CORRUPT;
	/* Every run takes at least two payload bytes: this bounds the
	 * allocation below by what the object really holds. */
	if (ulp_varint_get(&p, end, &nruns) || nruns > (uint64_t)(end - p) / 2)
		return ULP_ERR_CORRUPT;
	if (s->runs_cap < nruns) {
		free(s->runs);
		s->runs = malloc(sizeof(ulp_run) * (nruns ? nruns : 1));
		s->runs_cap = s->runs ? nruns : 0;
		if (!s->runs)
			return ULP_ERR_NOMEM;
	}
	for (size_t i = 0; i < nruns; i++) {
		ulp_run *r = &s->runs[i];
		uint64_t v;
		if (ulp_varint_get(&p, end, &r->len) || p >= end)
			return ULP_ERR_CORRUPT;
		v = *p++;
		r->dtype = v & 0x7f;
		r->has_ref = (uint8_t)(v >> 7);
		r->ref_off = 0;
		if (r->dtype >= ULP_DT_COUNT || r->len == 0 ||
		    r->len > len - total)
			return ULP_ERR_CORRUPT;
		total += r->len;
		if (r->dtype && r->len % ulp_dtype_size(r->dtype))
			return ULP_ERR_CORRUPT;
		if (r->has_ref) {
			if (!obj->has_ref ||
			    ulp_varint_get(&p, end, &r->ref_off) ||
			    r->ref_off > obj->ref_size ||
			    (r->dtype && r->len > obj->ref_size - r->ref_off))
				return ULP_ERR_CORRUPT;
		}
	}
	if (total != len)
		return ULP_ERR_CORRUPT;
	*pp = p;
	*nruns_out = nruns;
	return ULP_OK;
}

int ulp_chunk_needs_ref(const uint8_t *enc, size_t len, int *needs)
{
	const uint8_t *p = enc, *end = enc + len;
	uint64_t nruns, v;
	if (p >= end || *p++ != ULP_CHUNK_RUNS ||
	    ulp_varint_get(&p, end, &nruns))
		return ULP_ERR_CORRUPT;
	*needs = 0;
	for (uint64_t i = 0; i < nruns; i++) {
		if (ulp_varint_get(&p, end, &v) || p >= end)
			return ULP_ERR_CORRUPT;
		if (*p++ >> 7) {
			*needs = 1;
			return ULP_OK;
		}
	}
	return ULP_OK;
}

/* Decode a validated payload of chunk i into dst. */
static int decode_payload(ulp_dctx *d, const ulp_object *obj, size_t i,
                          ulp_ref_read_fn ref_read, void *ref_opaque,
                          uint8_t *dst)
{
	const ulp_obj_chunk *ch = &obj->chunks[i];
	const uint8_t *p = d->in.p, *end = d->in.p + ch->stored_len;
	chunk_scratch *s = &d->s;
	size_t nruns;
	int rc = parse_runs(s, &p, end, obj, ch->len, &nruns);
	if (rc)
		return rc;
	if (sid_reserve(s, nruns))
		return ULP_ERR_NOMEM;
	uint32_t nstreams = assign_streams(s->runs, nruns, s->sid);
	for (uint32_t id = 0; id < nstreams; id++) {
		size_t n = 0, nin = 0, first = nruns;
		uint64_t slen, pos = 0, first_pos = 0;
		for (size_t r = 0; r < nruns; r++) {
			if (s->sid[r] == id) {
				if (first == nruns) {
					first = r;
					first_pos = pos;
				}
				n += s->runs[r].len;
				nin++;
			}
			pos += s->runs[r].len;
		}
		if (!nin)
			continue;
		ulp_dtype dt = (ulp_dtype)s->runs[first].dtype;
		if (ulp_varint_get(&p, end, &slen) ||
		    slen > (uint64_t)(end - p))
			return ULP_ERR_CORRUPT;
		rc = gather(s, s->runs, nruns, id, NULL, obj->ref_size,
		            ref_read, ref_opaque);
		if (rc)
			return rc;
		/* A stream made of one run decodes in place. */
		uint8_t *to = dst + first_pos;
		if (nin > 1) {
			if (ulp_buf_reserve(&s->stream, n))
				return ULP_ERR_NOMEM;
			to = s->stream.p;
		}
		if (id == 0)
			rc = generic_decode(d, p, slen, to, n);
		else
			rc = ulp_float_decode(s->fs, ulp_dtype_fmt(dt), p, slen,
			                      s->ref.len ? s->ref.p : NULL,
			                      n / ulp_dtype_size(dt), to);
		if (rc)
			return rc;
		if (nin > 1)
			scatter(s, s->runs, nruns, id, to, dst);
		p += slen;
	}
	return p == end ? ULP_OK : ULP_ERR_CORRUPT;
}

int ulp_chunk_decode(ulp_dctx *d, const ulp_object *obj, size_t i,
                     ulp_ref_read_fn ref_read, void *ref_opaque, void *dst)
{
	const ulp_obj_chunk *ch;
	int rc;
	if (!d || !obj || i >= obj->nchunks || !dst)
		return ULP_ERR_ARG;
	ch = &obj->chunks[i];
	if (ulp_buf_reserve(&d->in, ch->stored_len))
		return ULP_ERR_NOMEM;
	rc = obj->read_at(obj->opaque, ch->stored_off, d->in.p, ch->stored_len);
	if (rc)
		return rc < 0 ? rc : ULP_ERR_IO;
	if (XXH3_64bits(d->in.p, ch->stored_len) != ch->pay_hash)
		return ULP_ERR_CORRUPT;
	rc = decode_payload(d, obj, i, ref_read, ref_opaque, dst);
	if (rc)
		return rc;
	return XXH3_64bits(dst, ch->len) == ch->dec_hash ? ULP_OK
	                                                 : ULP_ERR_CORRUPT;
}
