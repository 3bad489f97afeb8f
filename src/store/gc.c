/*
 * gc.c - the garbage collector: rebase the dependants of ghosts, then let
 * the ghosts go.
 *
 * A ghost is a deleted version that live versions are still coded
 * against.  Each such dependant is decoded in full (into a temporary file
 * in staging/), re-encoded against the ghost's own reference when that
 * one is live (and the chain stays short enough), else as a keyframe,
 * and its row switched to the new object in one transaction, which also
 * fixes the depths below it and deletes every ghost nothing needs any
 * more.  Only then are old objects removed.
 */
#include "store/store_internal.h"

#include <sys/mman.h>
#include <time.h>

typedef struct job {
	ulp_version_info d; /* the dependant */
	uint64_t ghost;
	ulp_version_info n; /* its new reference (n.id 0: keyframe) */
	ulp_tensor_map dmap, nmap;
} job;

static const char Q_PAIR[] = "SELECT d.id, g.id, g.ref FROM versions AS g"
			     " JOIN versions AS d ON d.ref = g.id"
			     " WHERE g.state = 1 AND d.state = 0 LIMIT 1";

/* Find the next dependant to rebase (mu held): 1 found, 0 none, -errno. */
static int next_job(ulp_store *st, job *j)
{
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_PAIR, "");
	int rc = ulp_cat_step(st->cat, s);
	uint64_t did, nid;

	memset(j, 0, sizeof *j);
	if (rc <= 0)
		return rc;
	did = (uint64_t)sqlite3_column_int64(s, 0);
	j->ghost = (uint64_t)sqlite3_column_int64(s, 1);
	nid = (uint64_t)sqlite3_column_int64(s, 2);
	ulp_cat_done(s);
	rc = ulp_version_get_locked(st, did, &j->d);
	if (rc == 0)
		rc = ulp_version_tmap_locked(st, did, &j->dmap);
	if (rc == 0 && nid)
		rc = ulp_version_get_locked(st, nid, &j->n);
	if (rc < 0)
		return rc;
	if (j->n.id && (j->n.state != ULP_VERSION_LIVE ||
	                j->n.depth + 1 >= st->opts.keyframe_every))
		memset(&j->n, 0, sizeof j->n);
	if (j->n.id &&
	    (rc = ulp_version_tmap_locked(st, j->n.id, &j->nmap)) < 0)
		return rc;
	return 1;
}

/* Decode version vid into a temporary file and map it. */
static int decode_to_tmp(ulp_store *st, const ulp_version_info *v, int *fdp,
                         void **map)
{
	char name[64];
	int fd, rc = 0;

	snprintf(name, sizeof name, "%s%llu", ULP_REBASE_PREFIX,
	         (unsigned long long)v->id);
	fd = openat(st->stg_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
	            0600);
	if (fd < 0)
		return -errno;
	unlinkat(st->stg_fd, name, 0); /* anonymous from now on */
	*fdp = fd;
	*map = NULL;
	if (v->size == 0)
		return 0;
	rc = ulp_version_to_fd(st, v->id, v->size, fd, &st->gc_stop);
	if (rc < 0)
		return rc;
	*map = mmap(NULL, v->size, PROT_READ, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		*map = NULL;
		return -errno;
	}
	return 0;
}

static const char Q_CHECK[] = "SELECT state, ref FROM versions WHERE id = ?";
static const char Q_REBASE[] = "UPDATE versions SET object = ?, ref = ?, depth "
			       "= ?, keyframe = ?,"
			       " stored = ?, estats = ? WHERE id = ?";
static const char Q_DEPTHS[] = "WITH RECURSIVE sub(id, depth) AS ("
			       " SELECT id, depth FROM versions WHERE id = ?1"
			       " UNION ALL"
			       " SELECT v.id, sub.depth + 1 FROM versions AS v"
			       "  JOIN sub ON v.ref = sub.id)"
			       " UPDATE versions SET depth ="
			       "  (SELECT depth FROM sub WHERE sub.id = "
			       "versions.id)"
			       " WHERE id IN (SELECT id FROM sub) AND id <> ?1";

static int switch_txn(ulp_store *st, const job *j, const char *object,
                      uint64_t stored, const uint8_t *estats,
                      ulp_obj_list *dead)
{
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_CHECK, "u", j->d.id);
	int rc = ulp_cat_step(st->cat, s);

	if (rc <= 0)
		return rc ? rc : -EAGAIN;
	int state = sqlite3_column_int(s, 0);
	uint64_t ref = (uint64_t)sqlite3_column_int64(s, 1);
	ulp_cat_done(s);
	if (state != ULP_VERSION_LIVE || ref != j->ghost)
		return -EAGAIN; /* changed meanwhile: look again */
	if (j->n.id) {
		int64_t nstate = -1;
		rc = ulp_cat_int(st->cat, &nstate, Q_CHECK, "u", j->n.id);
		if (rc < 0)
			return rc;
		if (nstate != ULP_VERSION_LIVE)
			return -EAGAIN;
	}
	rc = ulp_cat_exec(st->cat, Q_REBASE, "srudubu", object, j->n.id,
	                  (uint64_t)(j->n.id ? j->n.depth + 1 : 0),
	                  j->n.id == 0, stored, estats, (size_t)ULP_ESTATS_LEN,
	                  j->d.id);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_DEPTHS, "u", j->d.id);
	if (rc == 0)
		rc = ulp_versions_settle(st, dead);
	return rc;
}

static int rebase(ulp_store *st, job *j)
{
	ulp_obj_list dead = { 0 };
	char object[ULP_OBJ_NAME_LEN];
	uint8_t hash[16], estats[ULP_ESTATS_LEN];
	ulp_stats est;
	uint64_t stored = 0;
	void *data = NULL;
	int fd = -1, rc;

	rc = decode_to_tmp(st, &j->d, &fd, &data);
	if (rc == 0) {
		ulp_encode_req req = {
			.cur = data,
			.size = j->d.size,
			.map = &j->dmap,
			.ref = j->n.id,
			.ref_size = j->n.size,
			.ref_hash = j->n.hash,
			.ref_map = &j->nmap,
			.cctx = st->gc_cctx,
			.stop = &st->gc_stop,
			.stats = &est,
		};
		rc = ulp_encode_object(st, &req, object, &stored, hash);
		if (rc == 0 && memcmp(hash, j->d.hash, 16) != 0) {
			ulp_obj_unlink(st, object);
			rc = -EIO; /* decoded bytes differ from the version */
		}
	}
	if (data)
		munmap(data, j->d.size);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return rc;
	ulp_estats_encode(&est, estats);

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_begin(st->cat);
	if (rc == 0)
		rc = switch_txn(st, j, object, stored, estats, &dead);
	if (rc == 0)
		rc = ulp_cat_commit(st->cat);
	else
		ulp_cat_rollback(st->cat);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0) {
		ulp_obj_unlink(st, object);
		return rc;
	}
	/* The version's content is unchanged (its decoded chunks stay
	 * cached); only its opened object must go. */
	ulp_reader_forget(st, j->d.id);
	ulp_obj_unlink(st, j->d.object);
	ulp_obj_reap(st, &dead);
	atomic_fetch_add(&st->stat_rebases, 1);
	return 0;
}

static int gc_pass(ulp_store *st)
{
	int rc = 0, again = 0;

	while (!atomic_load(&st->gc_stop)) {
		job j;

		pthread_mutex_lock(&st->mu);
		rc = next_job(st, &j);
		pthread_mutex_unlock(&st->mu);
		int found = rc > 0;
		if (found)
			rc = rebase(st, &j);
		ulp_tensor_map_free(&j.dmap);
		ulp_tensor_map_free(&j.nmap);
		if (rc == -EAGAIN && ++again < 1000) {
			rc = 0; /* raced with a change: look again */
			continue;
		}
		if (rc < 0 || !found)
			break;
	}
	return rc == -ECANCELED ? 0 : rc;
}

static void *gc_main(void *arg)
{
	ulp_store *st = arg;

	pthread_mutex_lock(&st->mu);
	for (;;) {
		while (!atomic_load(&st->gc_stop) && !st->gc_kick &&
		       st->gc_req == st->gc_done)
			pthread_cond_wait(&st->gc_cv, &st->mu);
		if (atomic_load(&st->gc_stop))
			break;
		uint64_t req = st->gc_req;
		st->gc_kick = 0;
		pthread_mutex_unlock(&st->mu);
		int rc = gc_pass(st);
		pthread_mutex_lock(&st->mu);
		st->gc_err = rc;
		st->gc_done = req;
		pthread_cond_broadcast(&st->gc_done_cv);
		if (rc < 0 && !atomic_load(&st->gc_stop)) {
			/* Say, ENOSPC: try again later, not in a loop. */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += 5;
			pthread_cond_timedwait(&st->gc_cv, &st->mu, &ts);
			st->gc_kick = 1;
		}
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

void ulp_gc_kick(ulp_store *st)
{
	st->gc_kick = 1;
	pthread_cond_broadcast(&st->gc_cv);
}

int ulp_gc_start(ulp_store *st)
{
	st->gc_cctx = ulp_cctx_new();
	if (!st->gc_cctx)
		return -ENOMEM;
	int e = pthread_create(&st->gc_thread, NULL, gc_main, st);
	if (e)
		return -e;
	st->gc_started = 1;
	return 0;
}

void ulp_gc_stop(ulp_store *st)
{
	pthread_mutex_lock(&st->mu);
	atomic_store(&st->gc_stop, 1);
	pthread_cond_broadcast(&st->gc_cv);
	pthread_cond_broadcast(&st->gc_done_cv);
	pthread_mutex_unlock(&st->mu);
	if (st->gc_started)
		pthread_join(st->gc_thread, NULL);
	st->gc_started = 0;
	ulp_cctx_free(st->gc_cctx);
	st->gc_cctx = NULL;
}

int ulp_store_gc(ulp_store *st)
{
	int rc;

	pthread_mutex_lock(&st->mu);
	if (!st->gc_started || atomic_load(&st->gc_stop)) {
		pthread_mutex_unlock(&st->mu);
		return -ESHUTDOWN;
	}
	uint64_t req = ++st->gc_req;
	pthread_cond_broadcast(&st->gc_cv);
	while (st->gc_done < req && !atomic_load(&st->gc_stop))
		pthread_cond_wait(&st->gc_done_cv, &st->mu);
	rc = st->gc_done >= req ? st->gc_err : -ESHUTDOWN;
	pthread_mutex_unlock(&st->mu);
	return rc;
}
