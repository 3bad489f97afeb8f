/*
 * encoder.c - from a staged file to a committed version: reference
 * choice, encoding into an object, and the commit that swaps staging for
 * the version in one transaction.
 *
 * A file that may be coded given a sibling (side.h) waits, for a while,
 * for a sibling provider still staged to commit first, so that the
 * newest optimizer.pt is coded given the model.safetensors saved with it;
 * one that could not wait is given its side when it is flipped (gc.c).
 *
 * The staging file is mmapped while it is encoded.  Nothing changes it
 * meanwhile: whoever wants to (a writer opening it, a truncate) first
 * bumps the inode's gen, which makes the object sink fail at its next
 * write, and waits until the encoder has let go (ulp_queue_cancel).
 */
#include "store/encoder.h"
#include "store/staging.h"
#include "store/objects.h"
#include "store/reader.h"
#include "store/versions.h"
#include "store/vperm.h"
#include "store/reserve.h"
#include "store/tmap.h"
#include "store/side.h"
#include "store/plain.h"

#include "store/overlay.h"

#include <sys/mman.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ objects */

typedef struct sink {
	int fd;
	_Atomic uint64_t *cancel;
	uint64_t gen;
	_Atomic int *stop;
	int err;
} sink;

static int sink_write(void *opaque, const void *buf, size_t len)
{
	sink *k = opaque;

	if ((k->cancel && atomic_load(k->cancel) != k->gen) ||
	    (k->stop && atomic_load(k->stop))) {
		k->err = -ECANCELED;
		return ULP_ERR_IO;
	}
	int rc = ulp_write_all(k->fd, buf, len);
	if (rc < 0) {
		k->err = rc;
		return ULP_ERR_IO;
	}
	return ULP_OK;
}

/* The staging file is mapped whole while it is encoded.  Pages of the
 * chunks already written are dropped from the mapping as encoding moves
 * on (they stay in the page cache), so the daemon's resident size stays
 * at a few chunks however large the file. */
typedef struct drop_ctx {
	const uint8_t *base; /* page-aligned start of the mapping */
	uint64_t dropped;    /* bytes already dropped from the start */
} drop_ctx;

static void drop_done(void *opaque, uint64_t done, uint64_t total)
{
	drop_ctx *d = opaque;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t end = done / page * page;
	(void)total;
	if (!d->base || end <= d->dropped)
		return;
	madvise((void *)(uintptr_t)(d->base + d->dropped), end - d->dropped,
	        MADV_DONTNEED);
	d->dropped = end;
}

int ulp_encode_object(ulp_store *st, const ulp_encode_req *req,
                      char name[ULP_OBJ_NAME_LEN], uint64_t *stored,
                      uint8_t hash[16])
{
	static const ulp_tensor_map none = { ULP_FMT_UNKNOWN, 0, NULL };
	/* No task: the codec's threads read the reference concurrently,
	 * each read its own chain. */
	ulp_ref_ctx rctx = { st, req->ref, 0, NULL };
	ulp_ref_ctx fctx = { st, req->from, 0, NULL };
	ulp_ref_ctx sctx = { st, req->side, 0, NULL };
	ulp_encode_job job;
	char tmp[32];
	sink k = { -1, req->cancel, req->gen, req->stop, 0 };
	int rc;

	k.fd = ulp_obj_tmp_open(st, tmp);
	if (k.fd < 0)
		return k.fd;
	memset(&job, 0, sizeof job);
	job.cur = req->size && !req->from ? req->cur : NULL;
	if (req->size && req->from) {
		job.cur_read = ulp_ref_read;
		job.cur_opaque = &fctx;
	}
	job.cur_size = req->size;
	job.cur_map = req->map ? req->map : &none;
	job.has_ref = req->ref != 0;
	job.ref_size = req->ref_size;
	job.ref_map = req->ref_map ? req->ref_map : &none;
	job.ref_hash = req->ref_hash;
	job.ref_read = ulp_ref_read;
	job.ref_opaque = &rctx;
	job.nthreads = req->threads > 1 ? req->threads : 1;
	/* the pool's contexts, warm from the previous encodes */
	job.pool = st->pool;
	job.write = sink_write;
	job.write_opaque = &k;
	drop_ctx drop = { job.cur, 0 };
	job.progress = drop_done;
	job.progress_opaque = &drop;
	job.holes = req->holes;
	job.nholes = req->nholes;
	job.same = req->same;
	job.nsame = req->nsame;
	job.ref_chunk_hash = ulp_ref_chunk_hash;
	job.flat_hash = req->flat_hash;
	job.known_hash = req->known_hash;
	if (req->side) {
		job.side_hash = req->side_hash;
		job.side_size = req->side_size;
		job.side_map = req->side_map;
		job.side_read = ulp_ref_read;
		job.side_opaque = &sctx;
	}
	if (req->stats)
		memset(req->stats, 0, sizeof *req->stats);
	rc = ulp_encode_file(&job, req->stats, hash, stored);
	if (rc != ULP_OK) {
		ulp_obj_abandon(st, k.fd, tmp);
		return k.err ? k.err : ulp_errno_of(rc);
	}
	ulp_obj_newname(name);
	return ulp_obj_publish(st, k.fd, tmp, name, !req->own);
}

/* ------------------------------------------------------------ references */

typedef struct ref_choice {
	ulp_version_info v; /* v.id == 0: none */
} ref_choice;

static const char Q_PATH_LATEST[] = "SELECT id FROM versions WHERE path = ? "
				    "AND state = 0"
				    " ORDER BY seq DESC LIMIT 1";
static const char Q_LAYOUT_LATEST[] = "SELECT id FROM versions WHERE layout = "
				      "? AND state = 0"
				      " ORDER BY id DESC LIMIT 1";
/* Byte-wise suffix match (substr on a BLOB counts bytes, and no LIKE or
 * GLOB metacharacters to escape).  Scanning from the newest id stops at
 * the first hit, which for checkpoint directories is the previous one. */
static const char Q_BASE_LATEST[] = "SELECT id FROM versions WHERE state = 0"
				    " AND (path = ?1 OR substr(CAST(path AS "
				    "BLOB), -?2) = CAST(?3 AS BLOB))"
				    " ORDER BY id DESC LIMIT 1";
/* The same among the versions of one tensor layout (its index). */
static const char Q_BASE_LAYOUT_LATEST[] = "SELECT id FROM versions WHERE "
					   "layout = ?4 AND state = 0"
					   " AND (path = ?1 OR "
					   "substr(CAST(path AS BLOB), -?2) = "
					   "CAST(?3 AS BLOB))"
					   " ORDER BY id DESC LIMIT 1";
static const char Q_TMAP[] = "SELECT tmap FROM versions WHERE id = ?";

/* The latest live version whose file has path's base name, in any
 * directory, and with layout unless that is 0: checkpoint-N/config.json
 * has no tensor layout to match, but the same file in the previous
 * checkpoint directory is nearly or exactly the same bytes; each rank's
 * __{rank}_{n}.distcp has the layout of the others' too, but only its own
 * file of the previous checkpoint holds its tensors. */
static int base_latest(ulp_store *st, const char *path, uint64_t layout,
                       int64_t *id)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t n = strlen(base);
	char *suffix = malloc(n + 2);
	int rc;

	if (!suffix)
		return -ENOMEM;
	suffix[0] = '/';
	memcpy(suffix + 1, base, n + 1);
	if (layout)
		rc = ulp_cat_int(st->cat, id, Q_BASE_LAYOUT_LATEST, "sisi",
		                 base, (int64_t)(n + 1), suffix,
		                 (int64_t)layout);
	else
		rc = ulp_cat_int(st->cat, id, Q_BASE_LATEST, "sis", base,
		                 (int64_t)(n + 1), suffix);
	free(suffix);
	return rc;
}

int ulp_version_tmap_locked(ulp_store *st, uint64_t vid, ulp_tensor_map *out)
{
	ULP_MU_HELD(st);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q_TMAP, "u", vid);
	int rc = ulp_cat_step(st->cat, s);

	memset(out, 0, sizeof *out);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	const void *p = sqlite3_column_blob(s, 0);
	size_t n = (size_t)sqlite3_column_bytes(s, 0);
	rc = p ? ulp_tmap_decode(p, n, out) : 0;
	ulp_cat_done(s);
	return rc;
}

/* Whether path is one of the files a checkpoint's ranks write side by
 * side (DCP's __{rank}_{n}.distcp): files of one layout whose tensors are
 * unrelated, so that the latest file of the layout is no predecessor. */
static int rank_file(const char *path)
{
	size_t n = strlen(path), k = strlen(".distcp");

	return n >= k && strcmp(path + n - k, ".distcp") == 0;
}

/* The predecessor of a new version, which is coded against the new one
 * once that one has committed (a reverse delta, gc.c): the file's current
 * version, else the latest of its path, else the latest with its base name
 * and tensor layout, else (but for a rank's file) the latest with its
 * layout, else the latest with its base name.  mu held. */
static int choose_ref(ulp_store *st, uint64_t current, const char *path,
                      uint64_t layout, ref_choice *rc_out)
{
	ULP_MU_HELD(st);
	int64_t id = 0;
	int rc = 0;

	memset(rc_out, 0, sizeof *rc_out);
	if (current)
		id = (int64_t)current;
	if (!id)
		rc = ulp_cat_int(st->cat, &id, Q_PATH_LATEST, "s", path);
	if (rc >= 0 && !id && layout)
		rc = base_latest(st, path, layout, &id);
	if (rc >= 0 && !id && layout && !rank_file(path))
		rc = ulp_cat_int(st->cat, &id, Q_LAYOUT_LATEST, "i",
		                 (int64_t)layout);
	if (rc >= 0 && !id)
		rc = base_latest(st, path, 0, &id);
	if (rc < 0)
		return rc;
	if (!id)
		return 0;
	rc = ulp_version_get_locked(st, (uint64_t)id, &rc_out->v);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	if (rc_out->v.state != ULP_VERSION_LIVE)
		memset(&rc_out->v, 0, sizeof rc_out->v);
	return 0;
}

/* ------------------------------------------------------------ commit */

typedef struct new_version {
	ulp_version_info v;
	const uint8_t *tmap;
	size_t tmap_len;
	uint8_t estats[ULP_ESTATS_LEN];
	int unchanged;   /* same bytes as the current version: no new row */
	uint64_t pred;   /* the predecessor to flip (0: none) */
	unsigned nplain; /* plain commits of this process (crash points) */
} new_version;

static const char Q_MARK_FLIP[] = "UPDATE versions SET flip = ?1"
				  " WHERE id = ?2 AND state = 0"
				  " AND (ref IS NULL OR ref < id)";
static const char Q_NEXT_SEQ[] = "SELECT coalesce(max(seq), 0) + 1 FROM "
				 "versions WHERE path = ?";
static const char Q_INSERT[] = "INSERT INTO versions(ino, path, seq, size, "
			       "mtime, hash, object, ref,"
			       " depth, keyframe, stored, state, layout, tmap, "
			       "created, estats, side, plain)"
			       " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, "
			       "?, ?, ?, ?, ?)";

static int commit_txn(ulp_store *st, ulp_inode *in, new_version *nv,
                      ulp_obj_list *dead)
{
	ulp_version_info *v = &nv->v;
	ulp_cat_inode row;
	char *path = NULL;
	int64_t x;
	int rc;

	rc = ulp_cat_inode_get(st->cat, in->ino, &row);
	if (rc < 0)
		return rc;
	int64_t mt = in->times_dirty ? in->mtime : row.mtime;
	int64_t ct = in->times_dirty ? in->ctime : row.ctime;
	if (nv->unchanged)
		return ulp_cat_inode_content(st->cat, in->ino, in->version, 0,
		                             v->size, mt, ct);
	rc = ulp_ns_path_alloc(st, in->ino, &path);
	if (rc == 0)
		rc = ulp_cat_int(st->cat, &x, Q_NEXT_SEQ, "s", path);
	if (rc >= 0) {
		v->seq = (uint64_t)x;
		v->mtime_ns = mt;
		v->created_ns = ulp_now_ns();
		rc = ulp_cat_exec(st->cat, Q_INSERT, "usuuibsruduibibri",
		                  in->ino, path, v->seq, v->size, mt, v->hash,
		                  (size_t)16, v->object, v->ref,
		                  (uint64_t)v->depth, v->keyframe, v->stored,
		                  (int64_t)v->layout, nv->tmap, nv->tmap_len,
		                  v->created_ns, nv->estats,
		                  (size_t)ULP_ESTATS_LEN, v->side,
		                  (int64_t)v->plain);
	}
	free(path);
	if (rc < 0)
		return rc;
	v->id = (uint64_t)ulp_cat_last_rowid(st->cat);
	rc = ulp_vperm_record(st, v->id, &row);
	if (rc == 0)
		rc = ulp_cat_inode_content(st->cat, in->ino, v->id, 0, v->size,
		                           mt, ct);
	/* The predecessor, unless coded against a successor already, is
	 * next to be coded against this version (its flip, gc.c); before
	 * the retirement below, which may release it. */
	if (rc == 0 && nv->pred) {
		rc = ulp_cat_exec(st->cat, Q_MARK_FLIP, "uu", v->id, nv->pred);
		if (rc == 0 && ulp_cat_changes(st->cat))
			ulp_gc_note_work(st);
	}
	if (rc == 0 && in->version)
		rc = ulp_versions_retire(st, in->version, dead);
	if (rc == 0 && v->plain)
		rc = ulp_plain_bound_txn(st);
	return rc;
}

/* Commit nv for in if nothing changed in the meantime: 0, 1 (stale) or
 * -errno (-EAGAIN: its side went meanwhile).  The object of a version not
 * committed is removed. */
static int commit(ulp_store *st, ulp_inode *in, uint64_t gen, new_version *nv)
{
	ulp_obj_list dead = { 0 };
	int rc;

	ulp_data_wrlock(in);
	pthread_mutex_lock(&st->mu);
	int64_t side_state = ULP_VERSION_LIVE;
	if (atomic_load(&in->gen) != gen || in->unlinked || !in->staged) {
		rc = 1;
	} else if (nv->v.plain && (in->bk_held || in->bk_kept)) {
		rc = -EAGAIN; /* the kernel may write it: code it instead */
	} else if (nv->v.side && (rc = ulp_cat_int(st->cat, &side_state,
	                                           "SELECT state FROM versions "
	                                           "WHERE id = ?",
	                                           "u", nv->v.side)) <= 0) {
		rc = rc < 0 ? rc : -EAGAIN;
	} else if (side_state != ULP_VERSION_LIVE) {
		rc = -EAGAIN; /* released meanwhile: code it again */
	} else {
		rc = ulp_cat_begin(st->cat);
		if (rc == 0)
			rc = commit_txn(st, in, nv, &dead);
		if (rc == 0)
			rc = ulp_cat_commit(st->cat);
		else
			ulp_cat_rollback(st->cat);
	}
	if (rc == 0 && nv->v.plain)
		ulp_plain_crash_point(nv->nplain, 2);
	if (rc == 0) {
		/* Only now may the staged bytes go (unless the kernel still
		 * serves open files from them, backing.c). */
		if (!ulp_stage_keep_backing(st, in))
			ulp_stage_drop(st, in);
		if (!nv->unchanged)
			in->version = nv->v.id;
		in->size = nv->v.size;
		in->times_dirty = 0;
		atomic_fetch_add(&st->stat_commits, 1);
		ulp_reserve_restore(st); /* room again, maybe */
	} else {
		dead.n = 0;
		atomic_fetch_add(&st->stat_discards, 1);
	}
	pthread_mutex_unlock(&st->mu);
	ulp_data_unlock(in);
	if (rc != 0 && !nv->unchanged)
		ulp_obj_unlink(st, nv->v.object);
	ulp_obj_reap(st, &dead);
	return rc;
}

/* The tree hash of the mapped staged bytes, their pages dropped from
 * the mapping as it goes (as the encoder drops them). */
static int plain_hash(const uint8_t *data, uint64_t size, uint8_t hash[16])
{
	const uint64_t step = 64u << 20;
	ulp_hasher *h = ulp_hasher_new(ULP_HASH_TREE);

	if (!h)
		return -ENOMEM;
	for (uint64_t off = 0; off < size; off += step) {
		uint64_t n = size - off < step ? size - off : step;
		ulp_hasher_update(h, data + off, (size_t)n);
		madvise((void *)(uintptr_t)(data + off), (size_t)n,
		        MADV_DONTNEED);
	}
	int rc = ulp_errno_of(ulp_hasher_final(h, hash));
	ulp_hasher_free(h);
	return rc;
}

/* Commit in's staged bytes (fd, mapped at data) as a plain newest
 * (plain.h): hashed, linked into objects/, no encode.  cur: its current
 * version (id 0: none); pred: the predecessor to flip.  As commit(). */
static int commit_plain(ulp_store *st, ulp_inode *in, uint64_t gen, int fd,
                        const uint8_t *data, const ulp_version_info *cur,
                        uint64_t pred, new_version *nv)
{
	static _Atomic unsigned nplain;
	int rc = plain_hash(data, nv->v.size, nv->v.hash);

	if (rc < 0)
		return rc;
	if (cur->id && cur->ino == in->ino && cur->size == nv->v.size &&
	    memcmp(cur->hash, nv->v.hash, 16) == 0) {
		nv->unchanged = 1;
		return commit(st, in, gen, nv);
	}
	rc = ulp_plain_link(st, in, fd, nv->v.object, &nv->v.stored);
	if (rc < 0)
		return rc;
	nv->v.plain = 1;
	nv->v.keyframe = 1;
	nv->pred = pred;
	nv->nplain = atomic_fetch_add(&nplain, 1) + 1;
	ulp_plain_crash_point(nv->nplain, 1);
	return commit(st, in, gen, nv);
}

/* ------------------------------------------------------------ encode */

/* How long a user waits for a sibling provider to commit, counted from
 * its own last write: a provider left open for writing must not hold it
 * back for ever (its flip adds the side later). */
#define SIDE_WAIT_NS (60 * 1000000000ll)

int ulp_encode_again(ulp_store *st, const ulp_version_info *d,
                     const ulp_tensor_map *dmap, const ulp_version_info *n,
                     const ulp_tensor_map *nmap, const ulp_side_pick *side,
                     _Atomic int *stop, int quiet, char name[ULP_OBJ_NAME_LEN],
                     uint64_t *stored, uint64_t *side_read, ulp_stats *est)
{
	uint8_t hash[16];
	*side_read = 0;
	int kind = ulp_version_hash_kind(st, d->id);
	if (kind < 0)
		return kind;
	ulp_encode_req req = {
		.from = d->id,
		.size = d->size,
		.map = dmap,
		.ref = n->id,
		.ref_size = n->size,
		.ref_hash = n->hash,
		.ref_map = nmap,
		/* a big file: the encoders' share of cores, as a lone commit
		 * gets (below a few chunks, threads cost more than they give) */
		.threads = d->size >= (8u << 20) ? st->opts.encoder_threads : 1,
		.stop = stop,
		.stats = est,
		.flat_hash = kind == ULP_HASH_FLAT,
		.side = side->v.id,
		.side_size = side->v.size,
		.side_hash = side->v.hash,
		.side_map = &side->map,
		.own = quiet,
	};
	int rc = ulp_encode_object(st, &req, name, stored, hash);
	if (rc == 0 && memcmp(hash, d->hash, 16) != 0) {
		if (quiet)
			unlinkat(st->obj_fd, name, 0);
		else
			ulp_obj_unlink(st, name);
		return -EIO; /* decoded bytes differ from the version */
	}
	/* named only if some chunk reads it */
	if (rc == 0 && est->chunks_side)
		*side_read = side->v.id;
	return rc;
}

/* The side of a new version of path (staged in fd, mapped at data): 0
 * (side->v.id 0: none), -EAGAIN while a provider beside it is still
 * staged (retried soon: queue.c), or -errno. */
static int choose_side(ulp_store *st, const char *path, int fd,
                       const uint8_t *data, uint64_t size,
                       const ulp_tensor_map *map, ulp_side_pick *side)
{
	struct stat sb;
	pthread_mutex_lock(&st->mu);
	int rc = ulp_side_pending(st, path);
	pthread_mutex_unlock(&st->mu);
	if (rc < 0)
		return rc;
	if (rc > 0 && fstat(fd, &sb) == 0 &&
	    ulp_now_ns() - ((int64_t)sb.st_mtim.tv_sec * 1000000000 +
	                    sb.st_mtim.tv_nsec) <
	            SIDE_WAIT_NS)
		return -EAGAIN;
	ulp_side_mem mem = { data, size };
	return ulp_side_find(st, path, ulp_now_ns(), map, ulp_side_mem_read,
	                     &mem, side);
}

/* How a file copied up from version cur (id current; ov its overlay,
 * NULL when not copied up) is coded: rc (the caller's so far) or the
 * first error, with u, *plan and the unchanged ranges *same / *nsame. */
typedef struct copyup_use {
	int generic, tensor, pristine, kind;
} copyup_use;

static int copyup_plan(ulp_store *st, int rc, struct ulp_overlay *ov,
                       uint64_t current, uint64_t size,
                       const ulp_version_info *cur, ulp_tensor_map *bmap,
                       copyup_use *u, ulp_plan **plan, uint64_t (**same)[2],
                       size_t *nsame)
{
	/* Without tensors, or with the base's tensors at the same places
	 * (nothing written that the format's parser reads), the new version
	 * is cut into the base's chunks: those left whole need never be
	 * copied into staging, the encoder codes them as identical with
	 * their hashes from the base's index, and only the chunks written
	 * into are filled (what of them was not written).  Otherwise every
	 * chunk is filled and the format parsed again. */
	u->generic = ov && current && bmap->n == 0;
	u->tensor = ov && current && bmap->n &&
	            ulp_stage_same_map(ov, size, cur->size, bmap);
	/* Nothing written since the copy-up (a copy by reference,
	 * copyrange.c): the content is the base's, tensors included, so
	 * nothing is filled, every chunk is coded as identical with its hash
	 * from the base's index, and the file's hash is the base's. */
	u->pristine = ov && current && size == cur->size &&
	              ulp_overlay_pristine(ov, size);
	u->kind = u->pristine ? ulp_version_hash_kind(st, current) : 0;
	if (u->kind < 0)
		rc = u->kind;
	static const ulp_params dflt = { 0 };
	if (rc == 0 && (u->generic || u->tensor) && !u->pristine) {
		int r = ulp_plan_build(bmap, size, bmap, cur->size, &dflt,
		                       plan);
		if (r == ULP_ERR_NOMEM)
			rc = -ENOMEM;
		else if (r) /* a map that does not fit: filled, parsed again */
			u->generic = u->tensor = 0;
	}
	if (rc == 0 && ov && current)
		rc = ulp_stage_unchanged(st, ov, size, cur, *plan, same, nsame);
	u->pristine = u->pristine && *nsame;
	return rc;
}

/* Commit the coded version nv of in (generation gen): no new version when
 * its bytes are the current one's (cur, id current), else a forward delta
 * of it (nsame chunks coded as identical) or a keyframe that flips pred;
 * side, est, tmap: what the encoder used and counted.  As commit(). */
static int commit_coded(ulp_store *st, ulp_inode *in, uint64_t gen,
                        const ulp_version_info *cur, uint64_t current,
                        size_t nsame, uint64_t pred, uint64_t side,
                        const ulp_stats *est, const uint8_t *tmap,
                        size_t tmap_len, new_version *nv)
{
	/* The encoder's hash is the only pass of hashing over the staged
	 * file; the bytes of the current version again (a rewrite of the
	 * same content) cost an encode, but give no new version.  (A copy
	 * of another file's version is a version of its own.) */
	if (current && cur->ino == in->ino && cur->size == nv->v.size &&
	    memcmp(cur->hash, nv->v.hash, 16) == 0) {
		ulp_obj_unlink(st, nv->v.object);
		nv->unchanged = 1;
		return commit(st, in, gen, nv);
	}
	if (nsame) {
		/* A forward delta: its base is not coded against it. */
		nv->v.ref = current;
		nv->v.depth = cur->depth + 1;
	} else {
		nv->pred = pred;
		nv->v.keyframe = 1;
	}
	/* A side no chunk reads is no dependency (every run chose its
	 * reference, or the copy was pristine). */
	nv->v.side = est->chunks_side ? side : 0;
	nv->tmap = tmap;
	nv->tmap_len = tmap_len;
	ulp_estats_encode(est, nv->estats);
	return commit(st, in, gen, nv);
}

int ulp_encode_inode(ulp_store *st, unsigned threads, ulp_inode *in)
{
	ulp_tensor_map map = { ULP_FMT_UNKNOWN, 0, NULL };
	ref_choice ref;
	new_version nv;
	ulp_version_info cur = { 0 };
	ulp_stats est;
	ulp_tensor_map bmap = { ULP_FMT_UNKNOWN, 0, NULL };
	uint8_t *tmap = NULL;
	size_t tmap_len = 0, nholes = 0, nsame = 0;
	uint64_t(*holes)[2] = NULL, (*same)[2] = NULL;
	void *data = NULL;
	char *path = NULL;
	ulp_plan *plan = NULL;
	int rc;

	memset(&ref, 0, sizeof ref);
	memset(&nv, 0, sizeof nv);
	pthread_mutex_lock(&st->mu);
	uint64_t gen = atomic_load(&in->gen);
	uint64_t size = in->size, current = in->version;
	int fd = in->fd;
	struct ulp_overlay *ov = in->ov;
	rc = in->staged ? ulp_ns_path_alloc(st, in->ino, &path) : 1;
	if (rc == 0 && current)
		rc = ulp_version_get_locked(st, current, &cur);
	pthread_mutex_unlock(&st->mu);
	if (rc == -ENOENT)
		rc = 1; /* unlinked meanwhile */
	/* A copy-up on demand: what was not written is coded as identical
	 * to the version it came from (when that keeps chains short); the
	 * chunks left whole are hashed from its index, not decoded. */
	if (rc == 0 && ov && current) {
		pthread_mutex_lock(&st->mu);
		rc = ulp_version_tmap_locked(st, current, &bmap);
		pthread_mutex_unlock(&st->mu);
	}
	ulp_side_pick side = { 0 };
	copyup_use cu;
	rc = copyup_plan(st, rc, ov, current, size, &cur, &bmap, &cu, &plan,
	                 &same, &nsame);
	int generic = cu.generic, tensor = cu.tensor, kind = cu.kind;
	int pristine = cu.pristine;
	/* The base's map holds for the new bytes (pristine: they are the
	 * base's; tensor: what the parser reads is). */
	int same_map = pristine || (tensor && nsame);
	int skip = generic || tensor || pristine;
	if (rc == 0 && ov)
		rc = ulp_stage_fill(st, in, ov, fd, size, gen,
		                    skip ? (const uint64_t(*)[2])same : NULL,
		                    skip ? nsame : 0);
	if (rc != 0)
		goto out;

	if (size && (rc = ulp_stage_holes(fd, size, &holes, &nholes)) < 0)
		goto out;
	if (size) {
		data = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (data == MAP_FAILED) {
			data = NULL;
			rc = -errno;
			goto out;
		}
		madvise(data, size, MADV_SEQUENTIAL);
	}
	nv.v.size = size;
	const ulp_tensor_map *cmap = same_map ? &bmap : &map;
	if (!(generic && nsame) && !same_map)
		rc = ulp_errno_of(ulp_format_parse(data, size, &map));
	if (rc == 0)
		rc = ulp_tmap_encode(cmap, &tmap, &tmap_len);
	if (rc < 0)
		goto out;
	nv.v.layout = ulp_tensor_map_layout_hash(cmap);

	pthread_mutex_lock(&st->mu);
	rc = choose_ref(st, current, path, nv.v.layout, &ref);
	int plain = rc == 0 && !pristine &&
	            ulp_plain_wanted(st, in, size, ov != NULL);
	pthread_mutex_unlock(&st->mu);
	if (plain) {
		nv.tmap = tmap;
		nv.tmap_len = tmap_len;
		rc = commit_plain(st, in, gen, fd, data, &cur, ref.v.id, &nv);
		goto out;
	}
	/* (a pristine copy reads nothing but its base) */
	if (rc == 0 && !st->opts.no_side && !pristine &&
	    ulp_side_wants(path, cmap))
		rc = choose_side(st, path, fd, data, size, cmap, &side);
	if (rc < 0)
		goto out;

	/* The newest version is standalone: it is the one read most; but
	 * an append or a patch reads the same coded against its base, most
	 * of its chunks identical to the base's. */
	ulp_encode_req req = {
		.cur = data,
		.size = size,
		.map = cmap,
		/* below a few chunks, threads cost more than they give */
		.threads = size >= (8u << 20) ? threads : 1,
		.cancel = &in->gen,
		.gen = gen,
		.stats = &est,
		.holes = (const uint64_t(*)[2])holes,
		.nholes = nholes,
		.ref = nsame ? current : 0,
		.ref_size = cur.size,
		.ref_hash = cur.hash,
		.ref_map = &bmap,
		.same = (const uint64_t(*)[2])same,
		.nsame = nsame,
		.flat_hash = pristine && kind == ULP_HASH_FLAT,
		.known_hash = pristine ? cur.hash : NULL,
		.side = side.v.id,
		.side_size = side.v.size,
		.side_hash = side.v.hash,
		.side_map = &side.map,
	};
	rc = ulp_encode_object(st, &req, nv.v.object, &nv.v.stored, nv.v.hash);
	if (rc == -ECANCELED) {
		rc = 1;
		goto out;
	}
	if (rc < 0)
		goto out;
	rc = commit_coded(st, in, gen, &cur, current, nsame, ref.v.id,
	                  side.v.id, &est, tmap, tmap_len, &nv);
out:
	ulp_side_pick_free(&side);
	if (data)
		munmap(data, size);
	ulp_tensor_map_free(&map);
	ulp_tensor_map_free(&bmap);
	free(holes);
	free(same);
	free(tmap);
	free(path);
	ulp_plan_free(plan);
	return rc;
}
