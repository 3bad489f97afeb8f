/*
 * uploads.c - deferred uploads of a writer's objects (-o upload_delay).
 *
 * Why.  The newest version of a lineage is stored standalone and, once its
 * successor commits, coded again as a reverse delta (store/gc.c).  Uploaded
 * at once, every version would go up twice, standalone and then as a
 * delta: 1.8 times what the bucket keeps.  So an object waits upload_delay
 * seconds in CACHE/objects before it goes up; one that a flip replaces
 * meanwhile is never uploaded at all.
 *
 * What stays true.  The bucket's view of the store is its published
 * catalog, and no snapshot is published before every object it names is in
 * the bucket: a publish first closes the gate (puts from then on wait for
 * it to open, so their versions commit after the snapshot), flushes the
 * pending uploads, takes the snapshot, and opens the gate again.  ulpfs sync and
 * umount publish, so they return only once everything closed is in the
 * bucket.  A pending object is never evicted from the object cache; after
 * a crash the next writer mount finds the live objects the bucket lacks
 * (the orphan sweep lists it) and uploads them at once.
 *
 * The pending list is small (the objects of the last few minutes) and
 * scanned linearly, under the bucket's mu.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ulp_pending {
	char name[40];
	long long due; /* monotonic seconds: upload from then on */
	int inflight;  /* an uploader is sending it */
	int held;      /* a forward delta is being made of it (reps.c) */
};

/* After a failed upload: try that one again this much later. */
#define RETRY_S 5

static long long mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec;
}

static ssize_t find(const ulp_bucket *b, const char *name)
{
	for (size_t i = 0; i < b->npend; i++)
		if (!strcmp(b->pend[i].name, name))
			return (ssize_t)i;
	return -1;
}

static void drop(ulp_bucket *b, size_t i)
{
	b->pend[i] = b->pend[--b->npend];
}

/* Queue name (mu held): 1, 2 when it was queued already, or -errno. */
static int add(ulp_bucket *b, const char *name, long long due)
{
	if (strlen(name) >= sizeof b->pend[0].name)
		return -EINVAL;
	if (find(b, name) >= 0)
		return 2;
	if (b->npend == b->cappend) {
		size_t nc = b->cappend ? 2 * b->cappend : 32;
		struct ulp_pending *nv = realloc(b->pend, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		b->pend = nv;
		b->cappend = nc;
	}
	struct ulp_pending *p = &b->pend[b->npend++];
	snprintf(p->name, sizeof p->name, "%s", name);
	p->due = due;
	p->inflight = 0;
	p->held = 0;
	pthread_cond_broadcast(&b->up_cv);
	return 1;
}

int ulp_up_defer(ulp_bucket *b, const char *name)
{
	if (b->gate)
		return 0; /* a publish is flushing: upload it now */
	int rc = add(b, name, mono_s() + b->o.upload_delay_s);
	return rc < 0 ? rc : 1;
}

int ulp_up_forget(ulp_bucket *b, const char *name)
{
	ssize_t i = find(b, name);
	if (i < 0 || b->pend[i].inflight)
		return 0; /* in the bucket, or soon: delete it later */
	drop(b, (size_t)i);
	pthread_cond_broadcast(&b->flush_cv);
	return 1;
}

int ulp_up_hold(ulp_bucket *b, const char *name, int hold)
{
	pthread_mutex_lock(&b->mu);
	ssize_t i = find(b, name);
	int ok = i >= 0 && !b->pend[i].inflight;
	if (ok)
		b->pend[i].held = hold;
	if (ok && !hold)
		pthread_cond_broadcast(&b->up_cv);
	pthread_mutex_unlock(&b->mu);
	return ok;
}

int ulp_bucket_pending(ulp_bucket *b, const char *name)
{
	pthread_mutex_lock(&b->mu);
	int p = find(b, name) >= 0;
	pthread_mutex_unlock(&b->mu);
	return p;
}

int ulp_up_recover(ulp_bucket *b, const char *name)
{
	pthread_mutex_lock(&b->mu);
	int rc = add(b, name, 0);
	pthread_mutex_unlock(&b->mu);
	return rc;
}

int ulp_up_young(ulp_bucket *b)
{
	long long now = mono_s();
	pthread_mutex_lock(&b->mu);
	int young = 0;
	for (size_t i = 0; i < b->npend && !young; i++)
		young = b->pend[i].due > now;
	pthread_mutex_unlock(&b->mu);
	return young;
}

size_t ulp_up_count(ulp_bucket *b)
{
	pthread_mutex_lock(&b->mu);
	size_t n = b->npend;
	pthread_mutex_unlock(&b->mu);
	return n;
}

void ulp_up_gate(ulp_bucket *b, int closed)
{
	pthread_mutex_lock(&b->mu);
	b->gate = closed;
	if (!closed) /* the puts that waited for it (bucket.c) */
		pthread_cond_broadcast(&b->flush_cv);
	pthread_mutex_unlock(&b->mu);
}

int ulp_up_flush(ulp_bucket *b)
{
	pthread_mutex_lock(&b->mu);
	b->up_err = 0;
	for (size_t i = 0; i < b->npend; i++)
		b->pend[i].due = 0;
	pthread_cond_broadcast(&b->up_cv);
	while (b->npend && !b->up_err && b->nup)
		pthread_cond_wait(&b->flush_cv, &b->mu);
	int rc = !b->npend ? 0 : b->up_err ? b->up_err : -EIO;
	pthread_mutex_unlock(&b->mu);
	return rc;
}

/* The next due upload, marked in flight (mu held): its index or -1, and
 * in *wait the seconds until the next one is due. */
static ssize_t next_due(ulp_bucket *b, long long *wait)
{
	long long now = mono_s();
	*wait = 3600;
	for (size_t i = 0; i < b->npend; i++) {
		struct ulp_pending *p = &b->pend[i];
		if (p->inflight || p->held)
			continue;
		if (p->due <= now) {
			p->inflight = 1;
			return (ssize_t)i;
		}
		if (p->due - now < *wait)
			*wait = p->due - now;
	}
	return -1;
}

static void *uploader_main(void *arg)
{
	ulp_bucket *b = arg;
	pthread_mutex_lock(&b->mu);
	while (!b->up_stop) {
		long long wait;
		ssize_t i = next_due(b, &wait);
		if (i < 0) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)wait;
			pthread_cond_timedwait(&b->up_cv, &b->mu, &ts);
			continue;
		}
		char name[sizeof b->pend[0].name];
		memcpy(name, b->pend[i].name, sizeof name);
		pthread_mutex_unlock(&b->mu);
		/* A reverse delta whose version is in the bucket otherwise
		 * (reps.c) is not uploaded at all; one whose version is being
		 * given its bucket copy waits for it (a flip during a
		 * publish's forward delta). */
		int sup = ulp_reps_superseded(b, name);
		int rc = sup ? 0 : ulp_bucket_upload(b, b->obj_dir_fd, name);
		pthread_mutex_lock(&b->mu);
		i = find(b, name);
		if (i < 0)
			continue; /* cannot happen: in flight, nobody drops it */
		if (sup == 2) {
			b->pend[i].inflight = 0;
			b->pend[i].due = mono_s() + 1;
			continue;
		}
		/* ENOENT: the object was removed (no version needs it) after
		 * it was queued; its removal finds nothing pending to drop. */
		if (rc == 0 || rc == -ENOENT) {
			drop(b, (size_t)i);
		} else {
			b->pend[i].inflight = 0;
			b->pend[i].due = mono_s() + RETRY_S;
			b->up_err = rc;
		}
		pthread_cond_broadcast(&b->flush_cv);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

int ulp_up_start(ulp_bucket *b)
{
	pthread_condattr_t ca;
	int e = pthread_condattr_init(&ca);
	if (!e)
		e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!e)
		e = pthread_cond_init(&b->up_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (e)
		return -e;
	b->have_up_cv = 1;
	for (unsigned i = 0; i < ULP_UPLOADERS; i++) {
		if ((e = pthread_create(&b->up_thread[i], NULL, uploader_main,
		                        b)))
			break;
		b->nup++;
	}
	return b->nup ? 0 : -e;
}

void ulp_up_stop(ulp_bucket *b)
{
	pthread_mutex_lock(&b->mu);
	b->up_stop = 1;
	if (b->have_up_cv)
		pthread_cond_broadcast(&b->up_cv);
	pthread_mutex_unlock(&b->mu);
	for (unsigned i = 0; i < b->nup; i++)
		pthread_join(b->up_thread[i], NULL);
	b->nup = 0;
	if (b->have_up_cv)
		pthread_cond_destroy(&b->up_cv);
	b->have_up_cv = 0;
	free(b->pend);
	b->pend = NULL;
	b->npend = b->cappend = 0;
}
