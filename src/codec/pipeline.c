/*
 * pipeline.c - parallel, streaming encoding of a whole file.
 *
 * Worker threads claim chunks in order and encode them with their own
 * ulp_cctx; the calling thread writes finished chunks in order.  At most
 * `window` chunks are claimed but not yet written, which bounds memory
 * whatever the file size: that is what lets `ulpfs pack` stream a file
 * larger than memory.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <xxhash.h>

#include "codec_internal.h"

typedef struct enc_slot {
	int done;
	int rc;
	uint8_t *enc;
	size_t len;
	uint64_t dec_hash;
	ulp_stats st;
} enc_slot;

typedef struct enc_pipe {
	const ulp_encode_job *job;
	const ulp_plan *plan;
	pthread_mutex_t mu;
	pthread_cond_t cv_done, cv_space;
	size_t next_claim, next_write, window;
	enc_slot *slots;
	int abort;
} enc_pipe;

static void *worker(void *arg)
{
	enc_pipe *p = arg;
	const ulp_encode_job *job = p->job;
	ulp_cctx *cc = ulp_cctx_new();
	size_t n = ulp_plan_chunk_count(p->plan);

	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (!p->abort && p->next_claim < n &&
		       p->next_claim - p->next_write >= p->window)
			pthread_cond_wait(&p->cv_space, &p->mu);
		if (p->abort || p->next_claim >= n) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		size_t i = p->next_claim++;
		pthread_mutex_unlock(&p->mu);

		enc_slot s = {0};
		uint64_t off;
		uint32_t len;
		ulp_plan_chunk_range(p->plan, i, &off, &len);
		const uint8_t *src = job->cur + off;
		const void *enc = NULL;
		s.rc = cc ? ULP_OK : ULP_ERR_NOMEM;
		if (!s.rc)
			s.rc = ulp_chunk_encode(cc, p->plan, i, src,
			                        job->ref_read, job->ref_opaque,
			                        &enc, &s.len, &s.st);
		if (!s.rc) {
			s.dec_hash = XXH3_64bits(src, len);
			s.enc = malloc(s.len);
			if (s.enc)
				memcpy(s.enc, enc, s.len);
			else
				s.rc = ULP_ERR_NOMEM;
		}
		s.done = 1;
		pthread_mutex_lock(&p->mu);
		p->slots[i % p->window] = s;
		if (s.rc)
			p->abort = 1;
		pthread_cond_broadcast(&p->cv_done);
		pthread_cond_broadcast(&p->cv_space);
		pthread_mutex_unlock(&p->mu);
	}
	ulp_cctx_free(cc);
	return NULL;
}

/* Write chunks in order as the workers finish them. */
static int drain(enc_pipe *p, ulp_writer *w, XXH3_state_t *hs,
                 ulp_stats *stats)
{
	const ulp_encode_job *job = p->job;
	size_t n = ulp_plan_chunk_count(p->plan);
	int rc = ULP_OK;
	for (size_t i = 0; i < n && !rc; i++) {
		enc_slot s;
		uint64_t off;
		uint32_t len;
		pthread_mutex_lock(&p->mu);
		while (!p->slots[i % p->window].done && !p->abort)
			pthread_cond_wait(&p->cv_done, &p->mu);
		s = p->slots[i % p->window];
		if (!s.done) {
			/* Another chunk failed: find its error. */
			for (size_t k = 0; k < p->window; k++)
				if (p->slots[k].done && p->slots[k].rc)
					rc = p->slots[k].rc;
			pthread_mutex_unlock(&p->mu);
			return rc ? rc : ULP_ERR_IO;
		}
		p->slots[i % p->window] = (enc_slot){0};
		p->next_write++;
		pthread_cond_broadcast(&p->cv_space);
		pthread_mutex_unlock(&p->mu);

		rc = s.rc;
		ulp_plan_chunk_range(p->plan, i, &off, &len);
		if (!rc)
			rc = ulp_writer_add_chunk(w, off, len, s.enc, s.len,
			                          s.dec_hash);
		free(s.enc);
		if (rc)
			break;
		XXH3_128bits_update(hs, job->cur + off, len);
		if (stats)
			ulp_stats_add(stats, &s.st);
		if (job->progress)
			job->progress(job->progress_opaque, off + len,
			              job->cur_size);
	}
	if (rc) {
		pthread_mutex_lock(&p->mu);
		p->abort = 1;
		pthread_cond_broadcast(&p->cv_space);
		pthread_mutex_unlock(&p->mu);
	}
	return rc;
}

static unsigned thread_count(unsigned want)
{
	if (want)
		return want > 256 ? 256 : want;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

int ulp_encode_file(const ulp_encode_job *job, ulp_stats *stats,
                    uint8_t hash_out[16], uint64_t *object_size)
{
	ulp_plan *plan = NULL;
	ulp_writer *w = NULL;
	XXH3_state_t *hs = NULL;
	pthread_t th[256];
	unsigned nth, started = 0;
	enc_pipe p = {0};
	int rc;

	if (!job || (!job->cur && job->cur_size) || !job->write ||
	    (job->has_ref && !job->ref_read))
		return ULP_ERR_ARG;
	static const ulp_tensor_map none = {ULP_FMT_UNKNOWN, 0, NULL};
	const ulp_tensor_map *rm = job->ref_map ? job->ref_map : &none;
	rc = ulp_plan_build(job->cur_map, job->cur_size,
	                    job->has_ref ? rm : NULL, job->ref_size,
	                    &job->params, &plan);
	if (rc)
		return rc;
	if (stats)
		memset(stats, 0, sizeof(*stats));
	rc = ulp_writer_new(job->write, job->write_opaque,
	                    job->has_ref ? job->ref_hash : NULL, job->ref_size,
	                    &w);
	if (rc)
		goto out;
	hs = XXH3_createState();
	if (!hs) {
		rc = ULP_ERR_NOMEM;
		goto out;
	}
	XXH3_128bits_reset(hs);

	nth = thread_count(job->nthreads);
	p.job = job;
	p.plan = plan;
	p.window = 2 * (size_t)nth + 2;
	p.slots = calloc(p.window, sizeof(enc_slot));
	if (!p.slots) {
		rc = ULP_ERR_NOMEM;
		goto out;
	}
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv_done, NULL);
	pthread_cond_init(&p.cv_space, NULL);
	for (; started < nth; started++)
		if (pthread_create(&th[started], NULL, worker, &p))
			break;
	rc = started ? drain(&p, w, hs, stats) : ULP_ERR_NOMEM;
	if (!started)
		p.abort = 1;
	for (unsigned t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	for (size_t k = 0; k < p.window; k++)
		free(p.slots[k].enc);
	pthread_cond_destroy(&p.cv_space);
	pthread_cond_destroy(&p.cv_done);
	pthread_mutex_destroy(&p.mu);
	free(p.slots);
	if (!rc) {
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(hs));
		rc = ulp_writer_finish(w, c.digest, object_size);
		if (!rc && hash_out)
			memcpy(hash_out, c.digest, 16);
	}
out:
	XXH3_freeState(hs);
	ulp_writer_free(w);
	ulp_plan_free(plan);
	return rc;
}
