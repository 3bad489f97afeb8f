/*
 * queue.c - the encode queue and its pool of encoder threads.
 *
 * A staged file with no writer is queued with a due time (the settle
 * delay after its last close).  Encoder threads take the earliest due
 * entry, encode and commit it (encoder.c); a failed attempt goes back with
 * an exponential backoff.  The queue holds a ref on each entry's inode.
 */
#include "store/queue.h"
#include "store/staging.h"
#include "store/inode.h"
#include "store/encoder.h"
#include "store/remote.h"

#include <time.h>

#define BACKOFF_MIN_NS (100 * 1000000ll)
#define BACKOFF_MAX_NS (30 * 1000000000ll)

static void q_insert(ulp_store *st, ulp_inode *in)
{
	ulp_inode *pos = st->qhead.qprev;

	/* Mostly appended: walk back from the tail. */
	while (pos != &st->qhead && pos->due > in->due)
		pos = pos->qprev;
	in->qprev = pos;
	in->qnext = pos->qnext;
	pos->qnext->qprev = in;
	pos->qnext = in;
	st->nqueued++;
	if (in->failed) {
		st->nfailed++;
		ulp_stage_count_failed(st, in, 1);
	}
	pthread_cond_broadcast(&st->q_cv);
}

static void q_unlink(ulp_store *st, ulp_inode *in)
{
	in->qprev->qnext = in->qnext;
	in->qnext->qprev = in->qprev;
	in->qprev = in->qnext = NULL;
	st->nqueued--;
	if (in->failed) {
		st->nfailed--;
		ulp_stage_count_failed(st, in, -1);
	}
}

void ulp_queue_add(ulp_store *st, ulp_inode *in, int64_t delay_ns)
{
	ULP_MU_HELD(st);
	if (in->qstate != ULP_Q_NONE || in->nwriters || !in->staged ||
	    in->unlinked)
		return;
	in->refs++;
	in->qstate = ULP_Q_QUEUED;
	in->failed = 0;
	in->attempts = 0;
	in->due = ulp_mono_ns() + (st->stopping ? 0 : delay_ns);
	ulp_stage_count_queued(st, in, 1);
	q_insert(st, in);
}

void ulp_queue_remove(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	if (in->qstate != ULP_Q_QUEUED)
		return;
	q_unlink(st, in);
	in->qstate = ULP_Q_NONE;
	in->failed = 0;
	ulp_stage_count_queued(st, in, -1);
	in->refs--; /* the caller holds another */
	ulp_stage_space_changed(st);
}

void ulp_queue_cancel(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	atomic_fetch_add(&in->gen, 1);
	ulp_queue_remove(st, in);
	while (in->qstate == ULP_Q_ENCODING)
		pthread_cond_wait(&st->done_cv, &st->mu);
}

void ulp_queue_cancel_nowait(ulp_store *st, ulp_inode *in)
{
	ULP_MU_HELD(st);
	atomic_fetch_add(&in->gen, 1);
	ulp_queue_remove(st, in);
}

void ulp_queue_expedite(ulp_store *st)
{
	ULP_MU_HELD(st);
	int64_t now = ulp_mono_ns();

	for (ulp_inode *in = st->qhead.qnext; in != &st->qhead;
	     in = in->qnext) {
		if (in->failed) {
			st->nfailed--;
			ulp_stage_count_failed(st, in, -1);
			in->failed = 0;
		}
		in->due = now; /* all equal: the order stays valid */
	}
	pthread_cond_broadcast(&st->q_cv);
}

/* Put an entry whose encode failed back, due after a backoff. */
static void requeue_failed(ulp_store *st, ulp_inode *in, int err)
{
	int64_t wait = BACKOFF_MIN_NS;

	for (unsigned i = 0; i < in->attempts && wait < BACKOFF_MAX_NS; i++)
		wait *= 2;
	if (wait > BACKOFF_MAX_NS)
		wait = BACKOFF_MAX_NS;
	if (err != -EAGAIN && in->attempts == 0)
		fprintf(stderr,
		        "ulpfs: encoding inode %llu failed: %s (will retry; "
		        "the "
		        "staged copy is kept)\n",
		        (unsigned long long)in->ino, strerror(-err));
	in->attempts++;
	in->qstate = ULP_Q_QUEUED;
	in->fail_err = err;
	/* A reference deleted under the encoder is no failure: retry. */
	in->failed = err != -EAGAIN;
	in->due = ulp_mono_ns() + (err == -EAGAIN ? 10000000 : wait);
	q_insert(st, in);
}

static void timed_wait(ulp_store *st, int64_t until_mono)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(until_mono / 1000000000);
	ts.tv_nsec = (long)(until_mono % 1000000000);
	pthread_cond_timedwait(&st->q_cv, &st->mu, &ts);
}

typedef struct enc_arg {
	ulp_store *st;
	unsigned idx;
} enc_arg;

static void *encoder_main(void *arg)
{
	ulp_store *st = ((enc_arg *)arg)->st;
	ulp_cctx *cctx = st->enc_cctx[((enc_arg *)arg)->idx];

	free(arg);
	pthread_mutex_lock(&st->mu);
	for (;;) {
		/* Closing: leave once only failures are left (they are
		 * staged, so the next open queues them again). */
		if (st->stopping && st->nqueued == st->nfailed)
			break;
		ulp_inode *in = st->qhead.qnext;
		while (in != &st->qhead && st->stopping && in->failed)
			in = in->qnext;
		if (in == &st->qhead) {
			pthread_cond_wait(&st->q_cv, &st->mu);
			continue;
		}
		if (in->due > ulp_mono_ns()) {
			timed_wait(st, in->due);
			continue;
		}
		q_unlink(st, in);
		in->failed = 0;
		in->qstate = ULP_Q_ENCODING;
		st->nencoding++;
		/* Nothing else queued: this file gets the idle encoders'
		 * cores too, or one big checkpoint file would commit at one
		 * core's speed while the others wait.  Files queued later
		 * share the cores with it for a while. */
		unsigned threads = 1;
		if (st->qhead.qnext == &st->qhead &&
		    st->opts.encoder_threads > st->nencoding)
			threads += st->opts.encoder_threads - st->nencoding;
		pthread_mutex_unlock(&st->mu);

		int rc = ulp_encode_inode(st, cctx, threads, in);

		pthread_mutex_lock(&st->mu);
		st->nencoding--;
		if (rc < 0 && in->staged && !in->unlinked && !in->nwriters) {
			requeue_failed(st, in, rc);
		} else {
			in->qstate = ULP_Q_NONE;
			if (in->staged)
				ulp_stage_count_queued(st, in, -1);
			ulp_inode_put(st, in);
		}
		pthread_cond_broadcast(&st->done_cv);
		ulp_stage_space_changed(st);
	}
	pthread_cond_broadcast(&st->q_cv);
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

int ulp_encoder_start(ulp_store *st)
{
	unsigned n = st->opts.encoder_threads;

	st->enc_threads = calloc(n, sizeof *st->enc_threads);
	st->enc_cctx = calloc(n, sizeof *st->enc_cctx);
	if (!st->enc_threads || !st->enc_cctx)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		if (!(st->enc_cctx[i] = ulp_cctx_new()))
			return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		enc_arg *a = malloc(sizeof *a);
		if (!a)
			return -ENOMEM;
		a->st = st;
		a->idx = i;
		int e = pthread_create(&st->enc_threads[i], NULL, encoder_main,
		                       a);
		if (e) {
			free(a);
			return -e;
		}
		st->n_enc_threads++;
	}
	return 0;
}

void ulp_encoder_stop(ulp_store *st)
{
	pthread_mutex_lock(&st->mu);
	st->stopping = 1;
	ulp_queue_expedite(st);
	ulp_stage_space_changed(st);
	pthread_mutex_unlock(&st->mu);
	for (unsigned i = 0; i < st->n_enc_threads; i++)
		pthread_join(st->enc_threads[i], NULL);
	st->n_enc_threads = 0;
	free(st->enc_threads);
	st->enc_threads = NULL;
	if (st->enc_cctx) {
		for (unsigned i = 0; i < st->opts.encoder_threads; i++)
			ulp_cctx_free(st->enc_cctx[i]);
		free(st->enc_cctx);
		st->enc_cctx = NULL;
	}
}

int ulp_queue_sync(ulp_store *st)
{
	int rc = 0;

	pthread_mutex_lock(&st->mu);
	ulp_queue_expedite(st);
	while (st->nencoding > 0 || st->nqueued > st->nfailed) {
		if (st->n_enc_threads == 0)
			break; /* no encoders (closing): nothing will change */
		pthread_cond_wait(&st->done_cv, &st->mu);
	}
	for (ulp_inode *in = st->qhead.qnext; in != &st->qhead; in = in->qnext)
		if (in->failed && !rc)
			rc = in->fail_err;
	pthread_mutex_unlock(&st->mu);
	if (rc == 0 && st->opts.remote && st->opts.remote->synced)
		rc = st->opts.remote->synced(st->opts.remote->ctx);
	return rc;
}
