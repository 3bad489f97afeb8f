/*
 * gc.c - the background re-encoder: it turns the previous newest version
 * of a lineage into a reverse delta against its successor (a flip), and
 * rebases the dependants of ghosts so that the ghosts can go.
 *
 * Chain direction.  The newest version of a lineage is stored standalone,
 * or as its plain bytes (plain.h), so that the version read most (resume,
 * evaluation, export) decodes no chain.  When a successor commits, the
 * encoder marks the predecessor (versions.flip = successor); here the
 * predecessor is decoded and coded again against its successor (a plain
 * one is read as it is, and its plain file goes with the object it had,
 * once the row is switched).  A version stays standalone for good when
 * flipping it would make some version decode more than keyframe_every - 1
 * links, so a lineage has one standalone version per keyframe_every
 * versions, as forward chains had.  Deleting the oldest version deletes a
 * leaf: nothing depends on it, nothing is rebased.
 *
 * Rebasing.  A ghost is a deleted version that live versions are still
 * coded against.  Each such dependant is re-encoded against the ghost's
 * own reference when that one is live (and the chain stays short
 * enough), else standalone.
 *
 * Sides.  A version may also be coded given a side (side.h: the model
 * file of its checkpoint).  A flip or a rebase keeps the side it has
 * while that one is live, and a flip gives one to a version committed
 * before its provider was; a version whose side is a ghost is coded
 * again without it (against the same reference), and then the ghost can
 * go.
 *
 * Both are one routine: decode the version through the chunk cache
 * straight into the encoder (chunk by chunk, no temporary copy), encode it
 * against its new reference, check the hash, write and fsync the object;
 * then one transaction switches the row to the new object, fixes the
 * depths below it and deletes every ghost nothing needs any more; only
 * then is the old object removed.  A crash before the transaction leaves
 * an object no row names (removed at the next open) and the flip still
 * pending; after it, an old object no row names.
 *
 * Stores written before reverse chains hold forward chains (a version
 * coded against an older one).  They read as they are.  A flip of a
 * forward delta X (X's successor committed) also marks X's old reference
 * to be flipped against X, so the newest forward chain of a lineage turns
 * around link by link at its next commit (lazily); ulp_store_gc() starts
 * the same conversion at the newest version of every other forward chain.
 */
#include "store/store_core.h"

#include "store/gc.h"
#include "store/staging.h"
#include "store/encoder.h"
#include "store/objects.h"
#include "store/reader.h"
#include "store/versions.h"
#include "store/tmap.h"
#include "store/side.h"

#include <signal.h>
#include <time.h>

/* The gc thread's state (under st->mu unless said otherwise). */
struct ulp_gc {
	pthread_t thread;
	int started;
	pthread_cond_t cv;                /* the thread: work or stop */
	pthread_cond_t done_cv;           /* waiters of ulp_gc_request */
	uint64_t req, done;               /* requests made / served */
	int err;                          /* result of the last pass */
	int kick;                         /* ghosts or flips may be pending */
	int convert;                      /* the pass asked for converts forward
	                            chains (ulp_store_gc) */
	_Atomic int stop;                 /* read without mu */
	unsigned nflips;                  /* flips begun (the thread's) */
	unsigned crash_flip, crash_stage; /* tests: see crash_point */
};

typedef struct job {
	ulp_version_info d;  /* the version coded again */
	uint64_t expect_ref; /* its reference when the job was found */
	ulp_version_info n;  /* its new reference (n.id 0: standalone) */
	ulp_tensor_map dmap, nmap;
	int flip;      /* a flip (else the rebase of a ghost's dependant) */
	int drop_side; /* d's side is a ghost: coded again without it */
	char *path;    /* d's path (for a side to find) */
	uint64_t side; /* the side it was coded given (0: none) */
} job;

static void job_free(job *j)
{
	ulp_tensor_map_free(&j->dmap);
	ulp_tensor_map_free(&j->nmap);
	free(j->path);
	j->path = NULL;
}

/* The longest chain of live or ghost versions coded (directly or not)
 * against vid, in links; 0 when none is (mu held). */
static int subtree_height(ulp_store *st, uint64_t vid, int64_t *h)
{
	ULP_MU_HELD(st);
	static const char Q[] = "WITH RECURSIVE sub(id, d) AS ("
				" SELECT ?1, 0 UNION ALL"
				" SELECT v.id, sub.d + 1 FROM versions AS v"
				"  JOIN sub ON v.ref = sub.id"
				"  WHERE v.state <> 2 AND sub.d < 4096)"
				" SELECT max(d) FROM sub";
	*h = 0;
	int rc = ulp_cat_int(st->cat, h, Q, "u", vid);
	return rc < 0 ? rc : 0;
}

/* Sides whose chains one walk of reaches() keeps to follow: a side has
 * no side of its own (side.h), so a walk holds one or two. */
#define REACH_STACK 16

/* Whether decoding from (following references and sides) ever reaches
 * vid (mu held): coding vid against from, or given it, would then make a
 * cycle.  A model file's copy under another name, coded given the model,
 * is the model's predecessor by layout: without this, the model's flip
 * would code it against the copy. */
static int reaches(ulp_store *st, uint64_t from, uint64_t vid)
{
	uint64_t todo[REACH_STACK];
	size_t n = 0;
	unsigned steps = 0;
	ulp_version_info v;

	if (from)
		todo[n++] = from;
	while (n) {
		for (uint64_t x = todo[--n]; x; x = v.ref) {
			if (x == vid || ++steps > 4096 || n == REACH_STACK)
				return 1; /* a cycle, or absurdly deep: refuse */
			int rc = ulp_version_get_locked(st, x, &v);
			if (rc < 0)
				return rc;
			if (v.side)
				todo[n++] = v.side;
		}
	}
	return 0;
}

/* Whether d may be coded against n without some version decoding more
 * than keyframe_every - 1 links, and without a cycle: 1, 0 or -errno. */
static int fits(ulp_store *st, const ulp_version_info *d,
                const ulp_version_info *n)
{
	int64_t h;
	int rc;

	if (!n->id)
		return 1;
	if (n->state != ULP_VERSION_LIVE)
		return 0;
	if ((rc = subtree_height(st, d->id, &h)) < 0)
		return rc;
	if ((uint64_t)h + n->depth + 2 > st->opts.keyframe_every)
		return 0;
	rc = reaches(st, n->id, d->id);
	return rc < 0 ? rc : !rc;
}

/* Fill in d's map and path and, when it stays, n and its map (mu held). */
static int job_load(ulp_store *st, job *j, uint64_t did, uint64_t nid)
{
	ULP_MU_HELD(st);
	int rc = ulp_version_get_locked(st, did, &j->d);

	if (rc == 0)
		rc = ulp_version_tmap_locked(st, did, &j->dmap);
	if (rc == 0) {
		rc = ulp_version_path_locked(st, did, 0, &j->path);
		rc = rc == 1 ? 0 : rc == 0 ? -ENOENT : rc;
	}
	if (rc == 0 && nid)
		rc = ulp_version_get_locked(st, nid, &j->n);
	if (rc == -ENOENT && nid) {
		memset(&j->n, 0, sizeof j->n);
		rc = 0;
	}
	if (rc < 0)
		return rc;
	j->expect_ref = j->d.ref;
	rc = fits(st, &j->d, &j->n);
	if (rc == 0)
		memset(&j->n, 0, sizeof j->n);
	if (rc >= 0 && j->n.id)
		rc = ulp_version_tmap_locked(st, j->n.id, &j->nmap);
	return rc < 0 ? rc : 0;
}

static const char Q_PAIR[] = "SELECT d.id, g.ref FROM versions AS g"
			     " JOIN versions AS d ON d.ref = g.id"
			     " WHERE g.state = 1 AND d.state = 0 LIMIT 1";
static const char Q_SIDE_PAIR[] = "SELECT d.id, d.ref FROM versions AS g"
				  " JOIN versions AS d ON d.side = g.id"
				  " WHERE g.state = 1 AND d.state = 0 LIMIT 1";
static const char Q_FLIP_NEXT[] = "SELECT id, flip FROM versions"
				  " WHERE flip IS NOT NULL AND state = 0"
				  " ORDER BY id LIMIT 1";
static const char Q_FLIP_CLEAR[] = "UPDATE versions SET flip = NULL WHERE id "
				   "= ?";
static const char Q_FLIP_STALE[] = "UPDATE versions SET flip = NULL"
				   " WHERE flip IS NOT NULL AND state <> 0";

/* The next rebase (ghosts first: they hold space) or flip to do (mu
 * held): 1 found, 0 none, -errno. */
static int next_job(ulp_store *st, job *j)
{
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_PAIR, "");
	int rc = ulp_cat_step(st->cat, s);

	memset(j, 0, sizeof *j);
	if (rc == 1) {
		uint64_t did = (uint64_t)sqlite3_column_int64(s, 0);
		uint64_t nid = (uint64_t)sqlite3_column_int64(s, 1);
		ulp_cat_done(s);
		rc = job_load(st, j, did, nid);
		return rc < 0 ? rc : 1;
	}
	/* Then dependants of ghosts that are their sides: same reference,
	 * no side. */
	if (rc == 0) {
		s = ulp_cat_q(st->cat, Q_SIDE_PAIR, "");
		rc = ulp_cat_step(st->cat, s);
	}
	if (rc == 1) {
		uint64_t did = (uint64_t)sqlite3_column_int64(s, 0);
		uint64_t nid = (uint64_t)sqlite3_column_int64(s, 1);
		ulp_cat_done(s);
		j->drop_side = 1;
		rc = job_load(st, j, did, nid);
		return rc < 0 ? rc : 1;
	}
	if (rc < 0 || (rc = ulp_cat_exec(st->cat, Q_FLIP_STALE, "")) < 0)
		return rc;
	for (;;) {
		s = ulp_cat_q(st->cat, Q_FLIP_NEXT, "");
		rc = ulp_cat_step(st->cat, s);
		if (rc <= 0)
			return rc;
		uint64_t did = (uint64_t)sqlite3_column_int64(s, 0);
		uint64_t nid = (uint64_t)sqlite3_column_int64(s, 1);
		ulp_cat_done(s);
		job_free(j);
		memset(j, 0, sizeof *j);
		j->flip = 1;
		rc = job_load(st, j, did, nid);
		if (rc < 0)
			return rc;
		/* Standalone already and staying so (a keyframe for good),
		 * or coded against a successor already: nothing to do.  A
		 * plain version is coded either way. */
		if (j->n.id || (j->d.ref && j->d.ref < j->d.id) || j->d.plain)
			return 1;
		rc = ulp_cat_exec(st->cat, Q_FLIP_CLEAR, "u", did);
		if (rc < 0)
			return rc;
	}
}

/* The side j->d is to be coded given, into *pick (none: pick->v.id 0):
 * the one it has unless that is to go, else for a flip one beside it. */
static int job_side(ulp_store *st, const job *j, ulp_side_pick *pick)
{
	ulp_ref_ctx dctx = { st, j->d.id, 0, NULL };
	memset(pick, 0, sizeof *pick);
	if (j->drop_side || !ulp_side_wants(j->path, &j->dmap))
		return 0;
	/* side=0 adds none, and keeps the ones coded before */
	if (st->opts.no_side && !j->d.side)
		return 0;
	if (j->d.side)
		return ulp_side_load(st, j->d.side, &j->dmap, ulp_ref_read,
		                     &dctx, pick);
	if (!j->flip)
		return 0;
	int rc = ulp_side_find(st, j->path, j->d.created_ns, &j->dmap,
	                       ulp_ref_read, &dctx, pick);
	/* A new side must not decode through d itself. */
	if (rc == 0 && pick->v.id) {
		pthread_mutex_lock(&st->mu);
		rc = reaches(st, pick->v.id, j->d.id);
		pthread_mutex_unlock(&st->mu);
		if (rc != 0)
			ulp_side_pick_free(pick);
		rc = rc < 0 ? rc : 0;
	}
	return rc;
}

/* Code j->d again against j->n, given its side (job_side), into a new object, fsynced, whose decoded
 * hash is checked against the version's.  The encoder's workers pull j->d
 * decoded through the cache, a chunk each: no copy in staging, memory
 * bounded by the chunks in flight. */
static int reencode(ulp_store *st, job *j, char object[ULP_OBJ_NAME_LEN],
                    uint64_t *stored, uint8_t estats[ULP_ESTATS_LEN])
{
	ulp_stats est;
	ulp_side_pick side;
	int rc = job_side(st, j, &side);
	if (rc < 0)
		return rc;
	rc = ulp_encode_again(st, &j->d, &j->dmap, &j->n, &j->nmap, &side,
	                      &st->gc->stop, 0, object, stored, &j->side, &est);
	ulp_side_pick_free(&side);
	if (rc == 0)
		ulp_estats_encode(&est, estats);
	return rc;
}

static const char Q_CHECK[] = "SELECT state, ref FROM versions WHERE id = ?";
static const char Q_SWITCH[] = "UPDATE versions SET object = ?, ref = ?,"
			       " depth = ?, keyframe = ?, stored = ?,"
			       " estats = ?,"
			       " flip = CASE WHEN ? THEN NULL ELSE flip END,"
			       " side = ?, plain = 0"
			       " WHERE id = ?";
static const char Q_DEPTHS[] = "WITH RECURSIVE sub(id, depth) AS ("
			       " SELECT id, depth FROM versions WHERE id = ?1"
			       " UNION ALL"
			       " SELECT v.id, sub.depth + 1 FROM versions AS v"
			       "  JOIN sub ON v.ref = sub.id)"
			       " UPDATE versions SET depth ="
			       "  (SELECT depth FROM sub WHERE sub.id = "
			       "versions.id)"
			       " WHERE id IN (SELECT id FROM sub) AND id <> ?1";
/* A forward delta just flipped: its old (older) reference is next. */
static const char Q_FLIP_OLDER[] = "UPDATE versions SET flip = ?1"
				   " WHERE id = ?2 AND state = 0"
				   " AND flip IS NULL AND id < ?1"
				   " AND (ref IS NULL OR ref < id)";

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
	if (state != ULP_VERSION_LIVE || ref != j->expect_ref)
		return -EAGAIN; /* changed meanwhile: look again */
	/* The new reference and side must still be there to be named. */
	for (int k = 0; k < 2; k++) {
		uint64_t id = k ? j->side : j->n.id;
		int64_t nstate = -1;
		if (!id)
			continue;
		rc = ulp_cat_int(st->cat, &nstate, Q_CHECK, "u", id);
		if (rc < 0)
			return rc;
		if (nstate != ULP_VERSION_LIVE)
			return -EAGAIN;
	}
	rc = ulp_cat_exec(st->cat, Q_SWITCH, "srudubdru", object, j->n.id,
	                  (uint64_t)(j->n.id ? j->n.depth + 1 : 0),
	                  j->n.id == 0, stored, estats, (size_t)ULP_ESTATS_LEN,
	                  j->flip, j->side, j->d.id);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_DEPTHS, "u", j->d.id);
	if (rc == 0 && j->flip && j->expect_ref)
		rc = ulp_cat_exec(st->cat, Q_FLIP_OLDER, "uu", j->d.id,
		                  j->expect_ref);
	if (rc == 0)
		rc = ulp_versions_settle(st, dead);
	return rc;
}

/* ULPFS_TEST_CRASH_FLIP=N:S makes the N-th flip of this process kill it
 * (SIGKILL, as kill -9 would) at stage S: 1 once the new object is
 * durable, 2 once the transaction has committed, before the old object is
 * removed.  Only tests set it. */
static void crash_point(ulp_store *st, unsigned stage)
{
	if (st->gc->crash_flip && st->gc->nflips == st->gc->crash_flip &&
	    stage == st->gc->crash_stage)
		raise(SIGKILL);
}

static int run_job(ulp_store *st, job *j)
{
	ulp_obj_list dead = { 0 };
	char object[ULP_OBJ_NAME_LEN];
	uint8_t estats[ULP_ESTATS_LEN];
	uint64_t stored = 0;
	int rc = reencode(st, j, object, &stored, estats);

	if (rc < 0)
		return rc;
	if (j->flip)
		st->gc->nflips++;
	crash_point(st, 1);
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
	crash_point(st, 2);
	/* The version's content is unchanged (its decoded chunks stay
	 * cached); only its opened object must go. */
	ulp_reader_forget(st, j->d.id);
	ulp_obj_unlink(st, j->d.object);
	ulp_obj_reap(st, &dead);
	atomic_fetch_add(j->flip ? &st->stat_flips : &st->stat_rebases, 1);
	return 0;
}

/* ulp_store_gc(): the newest version of every forward chain (written
 * before reverse chains) starts its conversion: standalone first, then
 * each older link flipped in turn. */
static const char Q_MARK_FORWARD[] = "UPDATE versions SET flip = 0"
				     " WHERE state = 0 AND flip IS NULL"
				     " AND ref IS NOT NULL AND ref < id"
				     " AND NOT EXISTS(SELECT 1 FROM versions "
				     "AS "
				     "f WHERE f.ref = versions.id"
				     "  AND f.id > versions.id AND f.state <> "
				     "2)";

static int gc_pass(ulp_store *st, int convert)
{
	int rc = 0, again = 0;

	if (convert) {
		pthread_mutex_lock(&st->mu);
		rc = ulp_cat_exec(st->cat, Q_MARK_FORWARD, "");
		pthread_mutex_unlock(&st->mu);
		if (rc < 0)
			return rc;
	}
	while (!atomic_load(&st->gc->stop)) {
		job j;

		pthread_mutex_lock(&st->mu);
		rc = next_job(st, &j);
		pthread_mutex_unlock(&st->mu);
		int found = rc > 0;
		if (found)
			rc = run_job(st, &j);
		job_free(&j);
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
		while (!atomic_load(&st->gc->stop) && !st->gc->kick &&
		       st->gc->req == st->gc->done)
			pthread_cond_wait(&st->gc->cv, &st->mu);
		if (atomic_load(&st->gc->stop))
			break;
		uint64_t req = st->gc->req;
		int convert = st->gc->convert;
		st->gc->convert = 0;
		st->gc->kick = 0;
		pthread_mutex_unlock(&st->mu);
		int rc = gc_pass(st, convert);
		pthread_mutex_lock(&st->mu);
		st->gc->err = rc;
		st->gc->done = req;
		pthread_cond_broadcast(&st->gc->done_cv);
		if (rc < 0 && !atomic_load(&st->gc->stop)) {
			/* Say, ENOSPC: try again later, not in a loop. */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += 5;
			pthread_cond_timedwait(&st->gc->cv, &st->mu, &ts);
			st->gc->kick = 1;
		}
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

/* st->gc_kick, set while the thread runs (ulp_gc_note_work). */
static void gc_kick(ulp_store *st)
{
	ULP_MU_HELD(st);
	st->gc->kick = 1;
	pthread_cond_broadcast(&st->gc->cv);
}

int ulp_gc_start(ulp_store *st)
{
	ulp_gc *g = calloc(1, sizeof *g);
	const char *crash = getenv("ULPFS_TEST_CRASH_FLIP");
	int e;

	if (!g)
		return -ENOMEM;
	if (crash &&
	    sscanf(crash, "%u:%u", &g->crash_flip, &g->crash_stage) != 2)
		g->crash_flip = g->crash_stage = 0;
	g->kick = 1; /* ghosts or flips of an earlier run, if any */
	if (!(e = ulp_cond_init_mono(&g->cv))) {
		if ((e = pthread_cond_init(&g->done_cv, NULL)))
			pthread_cond_destroy(&g->cv);
	}
	if (e) {
		free(g);
		return -e;
	}
	pthread_mutex_lock(&st->mu);
	st->gc = g;
	st->gc_kick = gc_kick;
	pthread_mutex_unlock(&st->mu);
	e = pthread_create(&g->thread, NULL, gc_main, st);
	if (e)
		return -e;
	g->started = 1;
	return 0;
}

void ulp_gc_stop(ulp_store *st)
{
	ulp_gc *g = st->gc;

	if (!g)
		return;
	pthread_mutex_lock(&st->mu);
	st->gc_kick = NULL;
	atomic_store(&g->stop, 1);
	pthread_cond_broadcast(&g->cv);
	pthread_cond_broadcast(&g->done_cv);
	pthread_mutex_unlock(&st->mu);
	if (g->started)
		pthread_join(g->thread, NULL);
	pthread_cond_destroy(&g->cv);
	pthread_cond_destroy(&g->done_cv);
	st->gc = NULL;
	free(g);
}

int ulp_gc_request(ulp_store *st, int convert)
{
	int rc;

	pthread_mutex_lock(&st->mu);
	if (!st->gc || !st->gc->started || atomic_load(&st->gc->stop)) {
		pthread_mutex_unlock(&st->mu);
		return -ESHUTDOWN;
	}
	uint64_t req = ++st->gc->req;
	if (convert)
		st->gc->convert = 1;
	pthread_cond_broadcast(&st->gc->cv);
	while (st->gc->done < req && !atomic_load(&st->gc->stop))
		pthread_cond_wait(&st->gc->done_cv, &st->mu);
	rc = st->gc->done >= req ? st->gc->err : -ESHUTDOWN;
	pthread_mutex_unlock(&st->mu);
	return rc;
}
