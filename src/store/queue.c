/*
 * queue.c - the encode queue and its dispatcher.
 *
 * A staged file with no writer is queued with a due time (the settle
 * delay after its last close).  The dispatcher thread takes the earliest
 * due entry and runs its encode and commit (encoder.c) as a job on the
 * store's thread pool, up to encoder_threads at once; a failed attempt
 * goes back with an exponential backoff.  The queue holds a ref on each
 * entry's inode.
 */
#include "store/queue.h"
#include "store/staging.h"
#include "store/encoder.h"
#include "store/remote.h"

#include <time.h>

#define BACKOFF_MIN_NS (100 * 1000000ll)
#define BACKOFF_MAX_NS (30 * 1000000000ll)

/* An inode's place in the queue (ulp_inode.q; under st->mu). */
struct ulp_qentry {
	ulp_inode *in; /* NULL: the queue's head */
	ulp_qentry *prev, *next;
	int failed; /* the last attempt failed (error in fail_err) */
	int fail_err;
	unsigned attempts;
	int64_t due; /* CLOCK_MONOTONIC ns */
};

/* Under st->mu. */
struct ulp_queue {
	ulp_qentry head; /* sentinel of a circular list, sorted by due time */
	unsigned nqueued, nencoding;
	unsigned nfailed;   /* queued entries whose last try failed */
	pthread_cond_t cv;  /* encoders: work arrived / stopping */
	int stopping;       /* close: encoders exit once the queue is empty
	                      or every entry failed */
	pthread_t dispatch; /* the dispatcher */
	int started;
	ulp_pool_group *jobs; /* the encodes it runs on st->pool */
};

int ulp_queue_new(ulp_queue **out)
{
	ulp_queue *q = calloc(1, sizeof *q);
	int e = q ? ulp_cond_init_mono(&q->cv) : ENOMEM;

	if (e) {
		free(q);
		q = NULL;
	} else {
		q->head.next = q->head.prev = &q->head;
	}
	*out = q;
	return -e;
}

void ulp_queue_free(ulp_queue *q)
{
	if (!q)
		return;
	pthread_cond_destroy(&q->cv);
	free(q);
}

int ulp_qentry_new(ulp_inode *in)
{
	in->q = calloc(1, sizeof *in->q);
	if (!in->q)
		return -ENOMEM;
	in->q->in = in;
	return 0;
}

void ulp_qentry_free(ulp_inode *in)
{
	free(in->q);
	in->q = NULL;
}

unsigned ulp_queue_count(ulp_store *st)
{
	ULP_MU_HELD(st);
	return st->queue->nqueued + st->queue->nencoding;
}

static void q_insert(ulp_store *st, ulp_inode *in)
{
	ulp_qentry *e = in->q, *pos = st->queue->head.prev;

	/* Mostly appended: walk back from the tail. */
	while (pos != &st->queue->head && pos->due > e->due)
		pos = pos->prev;
	e->prev = pos;
	e->next = pos->next;
	pos->next->prev = e;
	pos->next = e;
	st->queue->nqueued++;
	if (e->failed) {
		st->queue->nfailed++;
		ulp_stage_count_failed(st, in, 1);
	}
	pthread_cond_broadcast(&st->queue->cv);
}

static void q_unlink(ulp_store *st, ulp_inode *in)
{
	ulp_qentry *e = in->q;

	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = NULL;
	st->queue->nqueued--;
	if (e->failed) {
		st->queue->nfailed--;
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
	in->q->failed = 0;
	in->q->attempts = 0;
	in->q->due = ulp_mono_ns() + (st->queue->stopping ? 0 : delay_ns);
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
	in->q->failed = 0;
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

	for (ulp_qentry *e = st->queue->head.next; e != &st->queue->head;
	     e = e->next) {
		if (e->failed) {
			st->queue->nfailed--;
			ulp_stage_count_failed(st, e->in, -1);
			e->failed = 0;
		}
		e->due = now; /* all equal: the order stays valid */
	}
	pthread_cond_broadcast(&st->queue->cv);
}

/* Put an entry whose encode failed back, due after a backoff. */
static void requeue_failed(ulp_store *st, ulp_inode *in, int err)
{
	ulp_qentry *e = in->q;
	int64_t wait = BACKOFF_MIN_NS;

	for (unsigned i = 0; i < e->attempts && wait < BACKOFF_MAX_NS; i++)
		wait *= 2;
	if (wait > BACKOFF_MAX_NS)
		wait = BACKOFF_MAX_NS;
	if (err != -EAGAIN && e->attempts == 0)
		fprintf(stderr,
		        "ulpfs: encoding inode %llu failed: %s (will retry; "
		        "the "
		        "staged copy is kept)\n",
		        (unsigned long long)in->ino, strerror(-err));
	e->attempts++;
	in->qstate = ULP_Q_QUEUED;
	e->fail_err = err;
	/* A reference deleted under the encoder is no failure: retry. */
	e->failed = err != -EAGAIN;
	e->due = ulp_mono_ns() + (err == -EAGAIN ? 10000000 : wait);
	q_insert(st, in);
}

static void timed_wait(ulp_store *st, int64_t until_mono)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(until_mono / 1000000000);
	ts.tv_nsec = (long)(until_mono % 1000000000);
	pthread_cond_timedwait(&st->queue->cv, &st->mu, &ts);
}

/* Encode in and put it back or let it go (as a pool job or, when none
 * could be queued, on the dispatcher's thread).  gen is in's when it was
 * taken off the queue: a writer that opened it while the job waited for
 * a pool thread (its gen bump waits for this job) makes it stale, so that
 * the encode does not take the content the writer goes on with. */
static void encode_entry(ulp_store *st, ulp_inode *in, unsigned threads,
                         uint64_t gen)
{
	pthread_mutex_lock(&st->mu);
	int stale = atomic_load(&in->gen) != gen;
	pthread_mutex_unlock(&st->mu);
	int rc = stale ? 1 : ulp_encode_inode(st, threads, in);

	pthread_mutex_lock(&st->mu);
	st->queue->nencoding--;
	if (rc < 0 && in->staged && !in->unlinked && !in->nwriters) {
		requeue_failed(st, in, rc);
	} else {
		in->qstate = ULP_Q_NONE;
		if (in->staged)
			ulp_stage_count_queued(st, in, -1);
		st->inode_put(st, in); /* ulp_inode_put */
	}
	pthread_cond_broadcast(&st->done_cv);
	pthread_cond_broadcast(&st->queue->cv); /* the dispatcher: a slot */
	ulp_stage_space_changed(st);
	pthread_mutex_unlock(&st->mu);
}

typedef struct enc_job {
	ulp_store *st;
	ulp_inode *in;
	unsigned threads;
	uint64_t gen;
} enc_job;

static void encode_job(void *arg)
{
	enc_job j = *(enc_job *)arg;

	free(arg);
	encode_entry(j.st, j.in, j.threads, j.gen);
}

static void *dispatch_main(void *arg)
{
	ulp_store *st = arg;
	ulp_queue *q = st->queue;

	pthread_mutex_lock(&st->mu);
	for (;;) {
		/* Closing: leave once only failures are left (they are
		 * staged, so the next open queues them again) and no encode
		 * is under way (it may put its entry back). */
		if (q->stopping && q->nqueued == q->nfailed &&
		    q->nencoding == 0)
			break;
		ulp_qentry *e = q->head.next;
		while (e != &q->head && q->stopping && e->failed)
			e = e->next;
		if (e == &q->head || q->nencoding >= st->opts.encoder_threads) {
			pthread_cond_wait(&q->cv, &st->mu);
			continue;
		}
		if (e->due > ulp_mono_ns()) {
			timed_wait(st, e->due);
			continue;
		}
		ulp_inode *in = e->in;
		q_unlink(st, in);
		e->failed = 0;
		in->qstate = ULP_Q_ENCODING;
		q->nencoding++;
		/* Nothing else queued: this file gets the idle encoders'
		 * cores too, or one big checkpoint file would commit at one
		 * core's speed while the others wait.  Files queued later
		 * share the cores with it for a while. */
		unsigned threads = 1;
		if (q->head.next == &q->head &&
		    st->opts.encoder_threads > q->nencoding)
			threads += st->opts.encoder_threads - q->nencoding;
		uint64_t gen = atomic_load(&in->gen);
		enc_job *j = malloc(sizeof *j);
		if (j) {
			*j = (enc_job){ st, in, threads, gen };
			if (ulp_pool_submit(q->jobs, encode_job, j) == ULP_OK)
				continue;
			free(j);
		}
		pthread_mutex_unlock(&st->mu);
		encode_entry(st, in, threads, gen);
		pthread_mutex_lock(&st->mu);
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

int ulp_encoder_start(ulp_store *st)
{
	st->queue->jobs = ulp_pool_group_new(st->pool);
	if (!st->queue->jobs)
		return -ENOMEM;
	int e = pthread_create(&st->queue->dispatch, NULL, dispatch_main, st);
	if (e)
		return -e;
	st->queue->started = 1;
	return 0;
}

void ulp_encoder_stop(ulp_store *st)
{
	pthread_mutex_lock(&st->mu);
	st->queue->stopping = 1;
	ulp_queue_expedite(st);
	ulp_stage_stop_waiting(st);
	pthread_mutex_unlock(&st->mu);
	if (st->queue->started)
		pthread_join(st->queue->dispatch, NULL);
	st->queue->started = 0;
	ulp_pool_group_free(st->queue->jobs); /* the last returns */
	st->queue->jobs = NULL;
}

int ulp_queue_sync(ulp_store *st)
{
	int rc = 0;

	pthread_mutex_lock(&st->mu);
	ulp_queue_expedite(st);
	while (st->queue->nencoding > 0 ||
	       st->queue->nqueued > st->queue->nfailed) {
		if (!st->queue->started)
			break; /* no encoders (closing): nothing will change */
		pthread_cond_wait(&st->done_cv, &st->mu);
	}
	for (ulp_qentry *e = st->queue->head.next; e != &st->queue->head;
	     e = e->next)
		if (e->failed && !rc)
			rc = e->fail_err;
	pthread_mutex_unlock(&st->mu);
	if (rc == 0 && st->opts.remote && st->opts.remote->synced)
		rc = st->opts.remote->synced(st->opts.remote->ctx);
	return rc;
}
