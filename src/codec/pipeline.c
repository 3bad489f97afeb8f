/*
 * pipeline.c - parallel, streaming encoding of a whole file.
 *
 * Worker jobs on a thread pool (the job's, else one started for the
 * call) claim chunks in order and encode them, each with a lane of its
 * own (context and buffers); the calling thread writes finished chunks in
 * order.  At most `window` chunks are claimed but not yet written, which
 * bounds memory whatever the file size: that is what lets `ulpfs pack`
 * stream a file larger than memory.  A worker that finds the window full
 * returns rather than block its pool thread; the writer starts workers
 * again as it frees slots, and while it waits for a chunk it runs this
 * file's queued workers itself, so an encode that is itself a job of the
 * same pool cannot deadlock, whatever the pool's size.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "codec_internal.h"

/* A slot's buffer belongs to the worker that claimed its chunk until
 * done is set, then to the writer; it is reused for later chunks. */
typedef struct enc_slot {
	int done;
	int rc;
	ulp_buf buf;
	ulp_buf src; /* the chunk's bytes read through cur_read (len 0: none) */
	uint64_t dec_hash;
	uint64_t enc_hash; /* of buf: hashed by the worker, not the writer */
	ulp_stats st;
} enc_slot;

/* Whether [off, off + len) lies inside one of n sorted ranges. */
static int in_ranges(const uint64_t (*v)[2], size_t n, uint64_t off,
                     uint32_t len)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* the first range ending after off */
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid][1] <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo][0] <= off && v[lo][1] >= off + len;
}

/* Chunk buffers of one thread: zeros (kept zero once grown) and a copy
 * of reference bytes. */
typedef struct src_bufs {
	ulp_buf zero, ref;
} src_bufs;

/* The logical bytes of a chunk: the reference's where the chunk is
 * unchanged since it (same: cur need not hold them), zeros where it lies
 * in a hole, else cur's, or with cur_read the bytes it gives, read into
 * pulled (NULL: the writer, which finds them there already).  NULL with
 * *rc set when they cannot be had. */
static const uint8_t *chunk_src(const ulp_encode_job *job, uint64_t off,
                                uint32_t len, int same, src_bufs *b,
                                ulp_buf *pulled, int *rc)
{
	if (same) {
		if (ulp_buf_reserve(&b->ref, len)) {
			*rc = ULP_ERR_NOMEM;
			return NULL;
		}
		int r = job->ref_read(job->ref_opaque, off, b->ref.p, len);
		if (r) {
			*rc = r < 0 ? r : ULP_ERR_IO;
			return NULL;
		}
		return b->ref.p;
	}
	if (!job->nholes || !in_ranges(job->holes, job->nholes, off, len)) {
		if (!job->cur_read)
			return job->cur + off;
		if (!pulled) { /* the worker read them, or failed */
			*rc = ULP_ERR_IO;
			return NULL;
		}
		if (ulp_buf_reserve(pulled, len)) {
			*rc = ULP_ERR_NOMEM;
			return NULL;
		}
		int r = job->cur_read(job->cur_opaque, off, pulled->p, len);
		if (r) {
			*rc = r < 0 ? r : ULP_ERR_IO;
			return NULL;
		}
		pulled->len = len;
		return pulled->p;
	}
	if (b->zero.len < len) {
		if (ulp_buf_reserve(&b->zero, len)) {
			*rc = ULP_ERR_NOMEM;
			return NULL;
		}
		memset(b->zero.p, 0, len);
		b->zero.len = len;
	}
	return b->zero.p;
}

static int is_same(const ulp_encode_job *job, uint64_t off, uint32_t len)
{
	return job->nsame && in_ranges(job->same, job->nsame, off, len);
}

/* The last hole chunk a worker coded: the next one of its length is the
 * same bytes again, not coded again. */
typedef struct zero_memo {
	uint32_t len; /* 0: none yet */
	ulp_buf enc;
	uint64_t hash;
	ulp_stats st;
} zero_memo;

/* Chunk i of plan, all hole: zeros, coded standalone as one generic run
 * whatever the plan says of it, so that the reference (a version a
 * copy-up shows through past the hole, say) is not read, nor decoded,
 * for it.  The runs of a chunk are in its payload: the decoder needs no
 * more. */
static int encode_zeros(ulp_cctx *cc, const ulp_plan *plan, size_t i,
                        const uint8_t *zeros, const void **enc, size_t *enc_len,
                        ulp_stats *st)
{
	ulp_run run = { .len = plan->chunks[i].len, .dtype = ULP_DT_GENERIC };
	ulp_chunk_plan cp = { plan->chunks[i].off, plan->chunks[i].len, 0, 1 };
	ulp_plan one = *plan;

	one.has_ref = 0;
	one.ref_size = 0;
	one.has_side = 0;
	one.side_size = 0;
	one.chunks = &cp;
	one.nchunks = 1;
	one.runs = &run;
	one.nruns = 1;
	return ulp_chunk_encode(cc, &one, 0, zeros, NULL, NULL, enc, enc_len,
	                        st);
}

/* What one worker job uses, handed from one to the next. */
typedef struct enc_lane {
	ulp_cctx *cc; /* job->cctx[lane], or the pool's (NULL: not yet) */
	src_bufs sb;
	zero_memo zm;
} enc_lane;

typedef struct enc_pipe {
	const ulp_encode_job *job;
	const ulp_plan *plan;
	ulp_pool *pool;
	ulp_pool_group *g;
	pthread_mutex_t mu;
	/* a chunk done, or a worker returned (on CLOCK_MONOTONIC) */
	pthread_cond_t cv_done;
	size_t n, next_claim, next_write, window;
	enc_slot *slots;
	enc_lane *lanes;   /* nlanes: at most that many workers at once */
	unsigned *free_ln; /* indices of the lanes no worker holds */
	unsigned nlanes, nfree;
	unsigned active; /* workers submitted, not yet returned */
	int help_now;    /* a queued worker outwaited the delay once */
	int abort;
} enc_pipe;

/* Encode chunk i into its slot (no lock held). */
static void encode_chunk(enc_pipe *p, enc_lane *ln, size_t i)
{
	const ulp_encode_job *job = p->job;
	enc_slot *slot = &p->slots[i % p->window];
	zero_memo *zm = &ln->zm;
	uint64_t off;
	uint32_t len;
	size_t enc_len = 0;
	ulp_stats st;

	if (!ln->cc)
		ln->cc = job->cctx ? job->cctx[ln - p->lanes]
		                   : ulp_pool_cctx_take(p->pool);
	ulp_plan_chunk_range(p->plan, i, &off, &len);
	int same = is_same(job, off, len);
	int rc = ln->cc ? ULP_OK : ULP_ERR_NOMEM;
	slot->src.len = 0;
	const uint8_t *src = NULL;
	const void *enc = NULL;
	uint64_t h = 0;
	int known = 0; /* h from the reference's index */
	if (!rc && same) {
		/* Unchanged since the reference: identical, if the plan maps
		 * it onto the same bytes; then its bytes are needed only for
		 * its hash, which the reference's index may hold. */
		rc = ulp_chunk_encode_copy(ln->cc, p->plan, i, &enc, &enc_len,
		                           &st);
		known = !rc && job->ref_chunk_hash &&
		        job->ref_chunk_hash(job->ref_opaque, off, len, &h) == 1;
	}
	if ((!rc || rc == ULP_ERR_REF) && !known) {
		int r2 = ULP_OK;
		src = chunk_src(job, off, len, same, &ln->sb, &slot->src, &r2);
		if (r2)
			rc = r2;
	}
	int zero = !rc && src && src == ln->sb.zero.p;
	if (zero && zm->len == len) {
		enc = zm->enc.p;
		enc_len = zm->enc.len;
		st = zm->st;
		h = zm->hash;
	} else if (zero) {
		rc = encode_zeros(ln->cc, p->plan, i, src, &enc, &enc_len, &st);
	} else if (!rc && !same) {
		rc = ULP_ERR_REF;
	}
	if (rc == ULP_ERR_REF) {
		const ulp_refs refs = { .ref_read = job->ref_read,
			                .ref_opaque = job->ref_opaque,
			                .side_read = job->side_read,
			                .side_opaque = job->side_opaque };
		rc = ulp_chunk_encode_refs(ln->cc, p->plan, i, src, &refs, &enc,
		                           &enc_len, &st);
	}
	/* The chunk's bytes to the slot: by exchanging buffers with the
	 * context where they are in its output (the context then encodes
	 * into the slot's old buffer, or a spare: never a fresh one). */
	if (!rc)
		ulp_cctx_spare_take(ln->cc, &slot->buf);
	if (!rc && !ulp_cctx_out_take(ln->cc, enc, enc_len, &slot->buf)) {
		rc = ulp_buf_reserve(&slot->buf, enc_len);
		if (!rc) {
			memcpy(slot->buf.p, enc, enc_len);
			slot->buf.len = enc_len;
		}
	}
	if (!rc && !known && !h)
		h = XXH3_64bits(src, len);
	if (!rc && zero && zm->len != len &&
	    !ulp_buf_reserve(&zm->enc, enc_len)) {
		memcpy(zm->enc.p, slot->buf.p, enc_len);
		zm->enc.len = enc_len;
		zm->st = st;
		zm->hash = h;
		zm->len = len;
	}
	uint64_t eh = rc ? 0 : XXH3_64bits(slot->buf.p, slot->buf.len);
	pthread_mutex_lock(&p->mu);
	slot->rc = rc;
	slot->st = st;
	slot->dec_hash = h;
	slot->enc_hash = eh;
	slot->done = 1;
	if (rc)
		p->abort = 1;
	pthread_cond_broadcast(&p->cv_done);
	pthread_mutex_unlock(&p->mu);
}

/* A worker job: chunks in order while the window has room. */
static void worker(void *arg)
{
	enc_pipe *p = arg;

	pthread_mutex_lock(&p->mu);
	enc_lane *ln = &p->lanes[p->free_ln[--p->nfree]];
	while (!p->abort && p->next_claim < p->n &&
	       p->next_claim - p->next_write < p->window) {
		size_t i = p->next_claim++;
		pthread_mutex_unlock(&p->mu);
		encode_chunk(p, ln, i);
		pthread_mutex_lock(&p->mu);
	}
	p->free_ln[p->nfree++] = (unsigned)(ln - p->lanes);
	p->active--;
	pthread_cond_broadcast(&p->cv_done);
	pthread_mutex_unlock(&p->mu);
}

/* While the window has room, start workers up to one per lane (p->mu
 * held): a worker busy with a chunk may claim the next only after it, so
 * every lane counts.  When none runs and none can be queued (out of
 * memory), run one here. */
static void spawn(enc_pipe *p)
{
	size_t lim = p->next_write + p->window < p->n
	                     ? p->next_write + p->window
	                     : p->n;

	while (!p->abort && p->active < p->nlanes && p->next_claim < lim &&
	       ulp_pool_submit(p->g, worker, p) == ULP_OK)
		p->active++;
	if (!p->abort && p->active == 0 && p->next_claim < lim) {
		p->active++;
		pthread_mutex_unlock(&p->mu);
		worker(p);
		pthread_mutex_lock(&p->mu);
	}
}

/* How long a queued worker is left to the pool's threads before the
 * writer runs it itself: an idle pool thread takes it in microseconds. */
#define HELP_DELAY_NS 500000L

/* Whether cv_done was signalled within HELP_DELAY_NS (p->mu held). */
static int wait_done_briefly(enc_pipe *p)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += HELP_DELAY_NS;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return pthread_cond_timedwait(&p->cv_done, &p->mu, &t) == 0;
}

/* Until slot s is done or the encode aborted (p->mu held): keep workers
 * going, and run this file's queued ones here rather than wait for a
 * pool thread that does not come.  With several lanes, a queued worker
 * is first left to the pool's threads for a moment: run here at once, it
 * kept the writer coding stretches of chunks while the window filled and
 * a pool thread stood idle (two threads on a 128 MiB bf16 keyframe: the
 * writer coded 34 of 67 chunks, 1.77x of one thread).  Once a worker
 * outwaits the delay, the pool's threads are busy, and the writer helps
 * at once for the rest of the file.  One lane is one thread: the writer
 * runs its worker at once. */
static void wait_slot(enc_pipe *p, const enc_slot *s)
{
	while (!s->done && !p->abort) {
		spawn(p);
		if (s->done || p->abort)
			break;
		if (p->nlanes > 1 && !p->help_now && wait_done_briefly(p))
			continue; /* a chunk done, or a worker returned */
		if (s->done || p->abort)
			break;
		pthread_mutex_unlock(&p->mu);
		int ran = ulp_pool_group_help(p->g);
		pthread_mutex_lock(&p->mu);
		/* the pool's threads are busy (this encode may be one of
		 * their jobs): no more delays for this file */
		p->help_now |= ran;
		if (!ran && !s->done && !p->abort)
			pthread_cond_wait(&p->cv_done, &p->mu);
	}
}

/* Whether chunk [off, off + len) of a file of size bytes is one leaf of
 * the tree hash. */
static int is_leaf(uint64_t off, uint32_t len, uint64_t size)
{
	return off % ULP_HASH_LEAF == 0 &&
	       (len == ULP_HASH_LEAF ||
	        (len < ULP_HASH_LEAF && off + len == size));
}

/* Write chunks in order as the workers finish them. */
static int drain(enc_pipe *p, ulp_writer *w, ulp_hasher *hs, ulp_stats *stats)
{
	const ulp_encode_job *job = p->job;
	size_t n = ulp_plan_chunk_count(p->plan);
	src_bufs sb = { { 0 }, { 0 } };
	int rc = ULP_OK;
	for (size_t i = 0; i < n && !rc; i++) {
		enc_slot *s = &p->slots[i % p->window];
		uint64_t off;
		uint32_t len;
		pthread_mutex_lock(&p->mu);
		wait_slot(p, s);
		if (!s->done) {
			/* Another chunk failed: find its error. */
			for (size_t k = 0; k < p->window; k++)
				if (p->slots[k].done && p->slots[k].rc)
					rc = p->slots[k].rc;
			pthread_mutex_unlock(&p->mu);
			ulp_buf_free(&sb.zero);
			ulp_buf_free(&sb.ref);
			return rc ? rc : ULP_ERR_IO;
		}
		pthread_mutex_unlock(&p->mu);

		rc = s->rc;
		ulp_plan_chunk_range(p->plan, i, &off, &len);
		if (!rc)
			rc = ulp_writer_add_chunk_hashed(w, off, len, s->buf.p,
			                                 s->buf.len, s->dec_hash,
			                                 s->enc_hash);
		/* A chunk that is a leaf is hashed by its decoded hash: its
		 * bytes are not read again (nor decoded, when unchanged). */
		if (!rc && !job->known_hash &&
		    (job->flat_hash || !is_leaf(off, len, job->cur_size) ||
		     ulp_hasher_leaf(hs, s->dec_hash, len) != ULP_OK)) {
			const uint8_t *src =
				s->src.len ? s->src.p
					   : chunk_src(job, off, len,
			                               is_same(job, off, len),
			                               &sb, NULL, &rc);
			if (!rc)
				ulp_hasher_update(hs, src, len);
		}
		if (!rc) {
			if (stats)
				ulp_stats_add(stats, &s->st);
		}
		/* Hand the slot back only after its bytes are written; with
		 * several lanes, restart at once the workers a full window
		 * stopped: the writer may have more done chunks to write
		 * before it waits (where it would restart them), and they
		 * stand idle meanwhile.  One lane stays on this thread. */
		pthread_mutex_lock(&p->mu);
		s->done = 0;
		p->next_write++;
		if (!rc && p->nlanes > 1)
			spawn(p);
		pthread_mutex_unlock(&p->mu);
		if (!rc && job->progress)
			job->progress(job->progress_opaque, off + len,
			              job->cur_size);
	}
	if (rc) {
		pthread_mutex_lock(&p->mu);
		p->abort = 1;
		pthread_mutex_unlock(&p->mu);
	}
	ulp_buf_free(&sb.zero);
	ulp_buf_free(&sb.ref);
	return rc;
}

static unsigned thread_count(unsigned want)
{
	if (want)
		return want > 256 ? 256 : want;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

/* Set up p's lanes and slots for nth workers on pool: 0 or
 * ULP_ERR_NOMEM. */
static int pipe_init(enc_pipe *p, const ulp_encode_job *job,
                     const ulp_plan *plan, ulp_pool *pool, unsigned nth)
{
	p->job = job;
	p->plan = plan;
	p->pool = pool;
	p->n = ulp_plan_chunk_count(plan);
	p->window = 2 * (size_t)nth + 2;
	p->nlanes = p->nfree = nth;
	pthread_condattr_t ca;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv_done, &ca);
	pthread_condattr_destroy(&ca);
	p->g = ulp_pool_group_new(pool);
	p->slots = calloc(p->window, sizeof(enc_slot));
	p->lanes = calloc(nth, sizeof(enc_lane));
	p->free_ln = calloc(nth, sizeof(unsigned));
	if (!p->g || !p->slots || !p->lanes || !p->free_ln)
		return ULP_ERR_NOMEM;
	for (unsigned k = 0; k < nth; k++)
		p->free_ln[k] = k;
	return ULP_OK;
}

/* Wait for p's workers, give their contexts back to the pool, free. */
static void pipe_fini(enc_pipe *p)
{
	if (p->g) {
		pthread_mutex_lock(&p->mu);
		p->abort = 1;
		pthread_mutex_unlock(&p->mu);
		ulp_pool_group_free(p->g);
	}
	/* The slots' buffers stay with the contexts for the next file. */
	for (size_t k = 0, l = 0; p->slots && p->lanes && k < p->window; k++) {
		for (unsigned t = 0; t < p->nlanes && !p->lanes[l].cc; t++)
			l = (l + 1) % p->nlanes;
		ulp_cctx_spare_give(p->lanes[l].cc, &p->slots[k].buf);
		l = (l + 1) % p->nlanes;
	}
	for (unsigned k = 0; p->lanes && k < p->nlanes; k++) {
		enc_lane *ln = &p->lanes[k];
		if (!p->job->cctx)
			ulp_pool_cctx_give(p->pool, ln->cc);
		ulp_buf_free(&ln->sb.zero);
		ulp_buf_free(&ln->sb.ref);
		ulp_buf_free(&ln->zm.enc);
	}
	for (size_t k = 0; p->slots && k < p->window; k++) {
		ulp_buf_free(&p->slots[k].buf);
		ulp_buf_free(&p->slots[k].src);
	}
	free(p->free_ln);
	free(p->lanes);
	free(p->slots);
	pthread_cond_destroy(&p->cv_done);
	pthread_mutex_destroy(&p->mu);
}

int ulp_encode_file(const ulp_encode_job *job, ulp_stats *stats,
                    uint8_t hash_out[16], uint64_t *object_size)
{
	ulp_plan *plan = NULL;
	ulp_writer *w = NULL;
	ulp_hasher *hs = NULL;
	ulp_pool *own = NULL;
	unsigned nth;
	enc_pipe p = { 0 };
	int rc;

	if (!job || (!job->cur && !job->cur_read && job->cur_size) ||
	    (job->cur && job->cur_read) || !job->write ||
	    (job->has_ref && (!job->ref_read || !job->ref_hash)) ||
	    (job->nsame && !job->has_ref) ||
	    (job->side_hash && !job->side_read) ||
	    (job->cctx && (!job->nthreads || job->nthreads > 256)))
		return ULP_ERR_ARG;
	static const ulp_tensor_map none = { ULP_FMT_UNKNOWN, 0, NULL };
	const ulp_tensor_map *rm = job->ref_map ? job->ref_map : &none;
	rc = ulp_plan_build_side(job->cur_map, job->cur_size,
	                         job->has_ref ? rm : NULL, job->ref_size,
	                         job->side_hash ? job->side_map : NULL,
	                         job->side_size, &job->params, &plan);
	if (rc)
		return rc;
	if (stats)
		memset(stats, 0, sizeof(*stats));
	int kind = job->flat_hash ? ULP_HASH_FLAT : ULP_HASH_TREE;
	/* An object names a side only when some chunk may read it. */
	rc = ulp_writer_new_side(job->write, job->write_opaque,
	                         job->has_ref ? job->ref_hash : NULL,
	                         job->ref_size,
	                         plan->has_side ? job->side_hash : NULL,
	                         job->side_size, kind, &w);
	if (rc)
		goto out;
	hs = ulp_hasher_new(kind);
	nth = thread_count(job->nthreads);
	ulp_pool *pool = job->pool ? job->pool : (own = ulp_pool_new(nth));
	if (!hs || !pool) {
		rc = ULP_ERR_NOMEM;
		goto out;
	}
	rc = pipe_init(&p, job, plan, pool, nth);
	if (!rc)
		rc = drain(&p, w, hs, stats);
	pipe_fini(&p);
	uint8_t digest[16];
	if (!rc && job->known_hash)
		memcpy(digest, job->known_hash, 16);
	else if (!rc)
		rc = ulp_hasher_final(hs, digest);
	if (!rc) {
		rc = ulp_writer_finish(w, digest, object_size);
		if (!rc && hash_out)
			memcpy(hash_out, digest, 16);
	}
out:
	ulp_pool_free(own);
	ulp_hasher_free(hs);
	ulp_writer_free(w);
	ulp_plan_free(plan);
	return rc;
}
