/*
 * store_internal.h - state shared by the modules of the store (src/store
 * only; src/store/store.h is the API).
 *
 * Locking, outermost first:
 *
 *   ulp_inode.data (rwlock)  held shared to read or write the bytes of a
 *                            staged file through its fd or to read its
 *                            committed version; exclusively to change
 *                            which of the two holds the content (copy-up,
 *                            truncate, commit).
 *   ulp_store.mu             everything else that changes: the catalog
 *                            connection, the in-memory inode table and
 *                            every field of ulp_inode not listed above,
 *                            the encode queue, staging accounting.  Held
 *                            for short catalog transactions, never while
 *                            encoding or decoding data.
 *   reader / cache mutexes   leaves: nothing is taken while they are held.
 *   read-ahead mutexes       (a handle's, then the pool's) nothing else
 *                            is taken while they are held.
 *
 * ulp_inode.staged, .fd, .ov and .version change only with both data (held
 * exclusively) and mu held, so either one is enough to read them; .size
 * is atomic and changes under mu.  Never wait for ulp_inode.data while
 * holding ulp_store.mu, and never call the reader (which takes mu on a
 * miss) with mu held.
 */
#ifndef ULP_STORE_INTERNAL_H
#define ULP_STORE_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "store/catalog.h"
#include "store/store.h"
#include "ulpfs/ulp.h"

/* Lock preconditions: ULP_MU_HELD(st) where a function needs st->mu held
 * by its caller.  Unless NDEBUG, st->mu is an error-checking mutex, which
 * refuses a second lock by its owner (EDEADLK) without changing anything:
 * any other answer means the caller did not hold it. */
#ifdef NDEBUG
#define ULP_MU_HELD(st) ((void)0)
#else
#define ULP_MU_HELD(st) assert(pthread_mutex_lock(&(st)->mu) == EDEADLK)
#endif

/* Length of an object name: 32 lower-case hex digits, plus NUL. */
#define ULP_OBJ_NAME_LEN 33
/* Staged file names are decimal inode numbers; temporaries start with a
 * dot (objects/.tmp-*, staging/.rebase-*) and are removed on open. */
#define ULP_TMP_PREFIX ".tmp-"
#define ULP_REBASE_PREFIX ".rebase-"

/* A committed staging file kept for the kernel (backing.c): renamed to
 * .held-<ino>, or (the rename failed) still staging/<ino>. */
enum { ULP_BK_NONE = 0, ULP_BK_RENAMED = 1, ULP_BK_NAMED = 2 };

/* Queue states of an inode. */
enum { ULP_Q_NONE = 0, ULP_Q_QUEUED = 1, ULP_Q_ENCODING = 2 };

/* The in-memory state of a regular file that is open, staged or being
 * encoded.  Every staged inode has one (it is queued when no writer holds
 * it); idle committed files have none. */
typedef struct ulp_inode {
	uint64_t ino;
	struct ulp_inode *hnext; /* hash chain */

	unsigned refs;     /* handles + queue + transient users */
	unsigned nwriters; /* writable handles */
	int unlinked;      /* nlink 0: the row is dropped with the last ref */
	int busy;          /* a stage transition (copy-up) is under way */

	pthread_rwlock_t data;

	/* Content: staged (fd on staging/<ino>, size below) or committed
	 * (version; 0 for a file that never had one). */
	int staged;
	int fd;
	uint64_t version;
	/* While staged: a copy-up on demand, whose gaps are the bytes of
	 * version (overlay.h); NULL: the staging file holds them all. */
	struct ulp_overlay *ov;
	_Atomic uint64_t size; /* logical size (while staged: of the
	                            staging file); readers load it
	                            without st->mu */
	int64_t mtime, ctime;  /* ns; valid while times_dirty */
	int times_dirty;       /* newer than the catalog row */
	_Atomic uint64_t gen;  /* bumped whenever staged content may change
	                            or the file dies: encoders compare it */
	int err;               /* last deferred write error (-errno) */
	uint32_t err_seq;      /* bumped with each new error */
	uint64_t acct;         /* bytes counted in st->staged_bytes (the
	                          staging file's blocks when last looked) */
	unsigned nclosing;     /* writable handles flushed by close(2) with
	                          no write since: their RELEASE, which the
	                          kernel sends after close returns, is on
	                          its way (file.c) */
	unsigned npt;          /* writable handles the kernel writes through
	                          (FUSE passthrough): size and mtime come
	                          from the staging file (backing.c) */
	int64_t bk_mtime;      /* the staging file's mtime last taken */
	unsigned bk_held;      /* registrations of the staging file as a
	                          kernel backing file (backing.c) */
	int bk_kept;           /* committed, and the staging file kept only
	                          for that backing: ULP_BK_* */

	/* Encode queue. */
	int qstate;
	int failed; /* the last attempt failed (error in fail_err) */
	int fail_err;
	unsigned attempts;
	int64_t due; /* CLOCK_MONOTONIC ns */
	struct ulp_inode *qprev, *qnext;
} ulp_inode;

typedef struct ulp_cache ulp_cache;
typedef struct ulp_reader ulp_reader;
typedef struct ulp_encoder ulp_encoder;
typedef struct ulp_ra_pool ulp_ra_pool;
typedef struct ulp_gc ulp_gc;

struct ulp_store {
	char *dir;
	int dir_fd, obj_fd, stg_fd, lock_fd;
	ulp_store_opts opts;

	pthread_mutex_t mu;
	ulp_catalog *cat;

	/* In-memory inodes, hashed by number. */
	ulp_inode **itab;
	size_t itab_size, itab_count;

	/* Encode queue, sorted by due time; counts under mu. */
	ulp_inode qhead; /* sentinel of a circular list */
	unsigned nqueued, nencoding;
	unsigned nfailed;       /* queued entries whose last try failed */
	pthread_cond_t q_cv;    /* encoders: work arrived / stopping */
	pthread_cond_t done_cv; /* an encode finished (committed or not) */
	int stopping;           /* close: encoders exit once the queue is
	                           empty or every entry failed */
	uint64_t staged_bytes;  /* allocated bytes of staged files */
	uint64_t pending_bytes; /* ... of those that are queued or encoding */
	uint64_t failed_bytes;  /* ... of those whose last encode failed */
	pthread_cond_t space_cv;
	unsigned space_waiters;
	/* Passthrough admission (file.c): the admitted writers, open, and
	 * the size of the last file closed (what the next writer is
	 * expected to write). */
	struct ulp_file *pt_admitted;
	uint64_t last_closed_size;

	pthread_t enc_dispatch; /* the encode queue's dispatcher (queue.c) */
	int enc_started;
	ulp_pool_group *enc_jobs; /* the encodes it runs on pool */

	ulp_gc *gc; /* the background re-encoder (gc.c) */

	/* The store's thread pool (encoder_threads threads): the codec's
	 * chunk workers, the encoders and read-ahead all run on it. */
	ulp_pool *pool;
	ulp_reader *reader;
	ulp_cache *cache;
	ulp_ra_pool *ra;

	int reserve_present; /* STORE/reserve is allocated (mu) */

	_Atomic uint64_t stat_commits, stat_discards, stat_rebases;
	_Atomic uint64_t stat_flips; /* versions turned into reverse deltas */
	_Atomic uint64_t stat_readahead; /* chunks queued */
};

/* ------------------------------------------------------------ helpers */

int64_t ulp_now_ns(void);  /* CLOCK_REALTIME */
int64_t ulp_mono_ns(void); /* CLOCK_MONOTONIC */
/* A libulp error as a negative errno. */
int ulp_errno_of(int ulp_err);
/* write() all of buf; 0 or -errno. */
int ulp_write_all(int fd, const void *buf, size_t len);
/* pread() exactly len bytes (short reads at EOF are an error: -EIO). */
int ulp_pread_all(int fd, void *buf, size_t len, uint64_t off);
/* pwrite() all of buf at off; 0 or -errno. */
int ulp_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* The same, skipping the whole 64 KiB blocks of zeros, where fd must read
 * as zeros already (a hole): a sparse file stays sparse. */
int ulp_pwrite_sparse(int fd, const void *buf, size_t len, uint64_t off);
/* A listing of the directory dir_fd from its start, on a descriptor of
 * its own (dir_fd stays open); closedir() it.  0 or -errno. */
int ulp_dir_list(int dir_fd, DIR **out);

/* ------------------------------------------------------------ inodes
 * (inode.c; all with st->mu held) */

/* Find or load the in-memory inode of a regular file and take a ref.
 * -ENOENT, -EISDIR, -EINVAL (not a regular file). */
int ulp_inode_get(ulp_store *st, uint64_t ino, ulp_inode **out);
ulp_inode *ulp_inode_find(ulp_store *st, uint64_t ino);
/* Drop a ref; the last one frees the inode, or destroys the file if it
 * was unlinked (staging, row and current version). */
void ulp_inode_put(ulp_store *st, ulp_inode *in);
/* Drop every in-memory inode (close). */
void ulp_inode_table_free(ulp_store *st);
/* Destroy the catalog row of a file nothing holds (unlink, rename over,
 * orphan recovery), inside the caller's transaction; the caller removes
 * any staging file after the commit.  The current version is released
 * unless its path still names an entry (then it is history of it). */
int ulp_inode_destroy_row(ulp_store *st, uint64_t ino, ulp_obj_list *dead);

/* ------------------------------------------------------------ staging
 * (staging.c) */

/* Bring an inode's content to staging for a change (open for writing,
 * truncate): cancel a queued or running encode, copy a committed version
 * up (unless trunc, which empties the file).  The caller holds a ref and
 * has counted itself in in->nwriters (so that no encode can start);
 * called without st->mu. */
int ulp_stage_acquire(ulp_store *st, ulp_inode *in, int trunc);
/* A file about to be replaced by a rename (mu held, a ref held): if its
 * staged content is closed and not yet committed, commit it now, so that
 * it stays in the history.  Drops mu while encoding. */
int ulp_stage_preserve(ulp_store *st, ulp_inode *in);
/* Create the staging file of a new inode (ulp_ns_create, in its
 * transaction): returns an fd or -errno. */
int ulp_stage_create(ulp_store *st, uint64_t ino);
void ulp_stage_name(uint64_t ino, char buf[32]);
/* Wait (st->mu held) until growing staged data by grow bytes fits the
 * staging limit, or until waiting cannot help. */
void ulp_stage_wait_space(ulp_store *st, uint64_t grow);
/* A writer (handle or truncate) is done with in (mu held): the last one
 * persists size and times and queues the file. */
void ulp_stage_writer_done(ulp_store *st, ulp_inode *in);
/* Set the logical size of a staged inode and its accounting (mu held). */
void ulp_stage_set_size(ulp_store *st, ulp_inode *in, uint64_t size);
/* Count the disk space the staging file of in takes now (its allocated
 * blocks) against the staging limit (mu held). */
void ulp_stage_account(ulp_store *st, ulp_inode *in);
/* Take size and mtime from the staging file, which the kernel writes
 * directly for passthrough handles (mu held; backing.c). */
void ulp_stage_sync_backing(ulp_store *st, ulp_inode *in);
/* Before the first passthrough handle: what the staging file holds now is
 * not a write, only later changes of its mtime are (mu held). */
void ulp_stage_mark_backing(ulp_inode *in);
/* Read a staged file (data lock held shared): from its staging file, and
 * for a copy-up on demand from the version below it too (copyup.c).  ra
 * (may be NULL): read-ahead of that version.  Never with st->mu held. */
ssize_t ulp_stage_read(ulp_store *st, ulp_inode *in, void *buf, size_t size,
                       uint64_t off, ulp_readahead *ra);
/* Before encoding a copy-up on demand (ov, its fd and size taken under
 * st->mu): copy what still comes from the version into the staging file,
 * so that it holds the whole content, except the nskip ranges skip
 * (sorted), which the encoder reads from the version itself.  0, 1
 * (in->gen moved on: a writer came) or -errno.  No lock held; readers
 * may run meanwhile. */
int ulp_stage_fill(ulp_store *st, ulp_inode *in, struct ulp_overlay *ov, int fd,
                   uint64_t size, uint64_t gen, const uint64_t (*skip)[2],
                   size_t nskip);
/* FALLOC_FL_ZERO_RANGE on a staging file that is to be size bytes long
 * (KEEP_SIZE unless the range ends past it), by punching a hole where
 * the filesystem has no ZERO_RANGE: 0 or -errno. */
int ulp_stage_zero(int fd, off_t off, off_t len, uint64_t size);
/* SEEK_DATA / SEEK_HOLE in a staged file from off < size (data lock held
 * shared): in the staging file's holes, and for a copy-up on demand the
 * version's bytes are data and the zeros past its limit a hole. */
off_t ulp_stage_seek(ulp_inode *in, uint64_t off, int whence);
/* The holes of the first size bytes of fd (of 64 KiB or more), for the
 * encoder to skip: *n pairs [lo, hi) in a malloc()ed array.  0, -ENOMEM. */
int ulp_stage_holes(int fd, uint64_t size, uint64_t (**out)[2], size_t *n);
/* The ranges of a copy-up on demand of size bytes still unchanged from
 * its base version (which the caller read under st->mu), before
 * ulp_stage_fill: the new version is coded against the base with those
 * chunks identical.  *n 0 (nothing malloc()ed) when it should be a
 * keyframe instead: the chain would grow past keyframe_every, or most of
 * it was written.  align (0: none): only the whole align-sized chunks of
 * each range.  0 or -ENOMEM. */
int ulp_stage_unchanged(ulp_store *st, struct ulp_overlay *ov, uint64_t size,
                        const ulp_version_info *base, uint64_t align,
                        uint64_t (**out)[2], size_t *n);
/* The inodes.staged value of a staged inode (ULP_STAGED_*). */
int ulp_stage_kind(const ulp_inode *in);
/* Drop an inode's staging fd and file and its accounting (mu held). */
void ulp_stage_drop(ulp_store *st, ulp_inode *in);
/* At a commit (data and mu held): 1 if the staging file stays, as the
 * kernel's backing file of open files (then in->bk_kept), else 0 (drop
 * it). */
int ulp_stage_keep_backing(ulp_store *st, ulp_inode *in);
/* A writer of a kept file (data and mu held): the staging file becomes
 * staging/<ino> again and the catalog says staged.  0 or -errno. */
int ulp_stage_reclaim(ulp_store *st, ulp_inode *in);
/* The name of in's staging file in staging/ (kept or not). */
void ulp_stage_kept_name(const ulp_inode *in, char buf[40]);

/* ------------------------------------------------------------ queue
 * (queue.c) and encoder (encoder.c) */

int ulp_encoder_start(ulp_store *st);
/* Drain the queue and join the threads (close). */
void ulp_encoder_stop(ulp_store *st);
/* Queue a staged inode with no writer (mu held); takes a ref. */
void ulp_queue_add(ulp_store *st, ulp_inode *in, int64_t delay_ns);
/* Take a queued inode off the queue (mu held) and drop the queue's ref:
 * the caller must hold a ref of its own. */
void ulp_queue_remove(ulp_store *st, ulp_inode *in);
/* Cancel a queued or running encode of in: bump gen, unqueue, wait for a
 * running encoder to let go (mu held; may wait on done_cv). */
void ulp_queue_cancel(ulp_store *st, ulp_inode *in);
/* The same without waiting: a file being unlinked (the encoder notices
 * the new gen and discards its work). */
void ulp_queue_cancel_nowait(ulp_store *st, ulp_inode *in);
/* Wait until every closed file is committed or failed (ulp_store_sync):
 * 0 or the error of a failed one. */
int ulp_queue_sync(ulp_store *st);
/* Make every queued entry due now (mu held). */
void ulp_queue_expedite(ulp_store *st);

/* Write an encoded object: plan + encode cur[0..size) against ref (0: a
 * keyframe) into objects/<name>, fsynced.  cancel, if not NULL, aborts
 * the write when *cancel != gen.  On success fills name and *stored. */
typedef struct ulp_encode_req {
	const uint8_t *cur;
	uint64_t size;
	uint64_t from; /* else (cur NULL): this version's bytes, decoded
	                  chunk by chunk through the cache as encoded */
	const ulp_tensor_map *map;
	uint64_t ref; /* reference version or 0 */
	uint64_t ref_size;
	const uint8_t *ref_hash; /* 16 bytes when ref */
	const ulp_tensor_map *ref_map;
	unsigned threads; /* chunks encoded at once, on st->pool (0: 1) */
	_Atomic uint64_t *cancel; /* abort when *cancel != gen */
	uint64_t gen;
	_Atomic int *stop; /* abort when set (may be NULL) */
	ulp_stats *stats;  /* filled with the encoder's statistics (may be
	                      NULL) */
	/* zeros in cur never read (ulp_stage_holes; may be NULL) */
	const uint64_t (*holes)[2];
	size_t nholes;
	/* bytes equal to ref's at the same offsets (ulp_stage_unchanged;
	 * may be NULL) */
	const uint64_t (*same)[2];
	size_t nsame;
	/* the content hash's kind: a version committed with a flat hash
	 * keeps it when coded again (other objects name it by that hash) */
	int flat_hash;
	/* the content hash when known (cur is a copy of ref; may be NULL) */
	const uint8_t *known_hash;
} ulp_encode_req;
int ulp_encode_object(ulp_store *st, const ulp_encode_req *req,
                      char name[ULP_OBJ_NAME_LEN], uint64_t *stored,
                      uint8_t hash[16]);

/* Encode a dequeued inode and commit it (encoder.c).  0: committed (or
 * nothing to do), 1: discarded (content changed meanwhile), -errno:
 * failed, to retry (-EAGAIN: retry at once). */
int ulp_encode_inode(ulp_store *st, unsigned threads, ulp_inode *in);

/* How long a file just created waits in the queue before it may be
 * committed empty (namespace.c): far longer than the gap between FUSE's
 * create and the open that follows it. */
#define ULP_CREATE_GRACE_NS (2 * 1000000000ll)

/* ------------------------------------------------------------ objects
 * (objects.c) */

void ulp_obj_newname(char name[ULP_OBJ_NAME_LEN]);
/* Open a temporary object file in objects/; fd or -errno. */
int ulp_obj_tmp_open(ulp_store *st, char tmp[32]);
/* fsync tmp, rename to name, fsync objects/; 0 or -errno. */
int ulp_obj_publish(ulp_store *st, int fd, const char *tmp, const char *name);
void ulp_obj_abandon(ulp_store *st, int fd, const char *tmp);
void ulp_obj_unlink(ulp_store *st, const char *name);
/* Unlink every object on the list (once the transaction that deleted
 * their versions has committed), forget them in the reader and the cache,
 * and free the list.  May be called with or without st->mu. */
void ulp_obj_reap(ulp_store *st, ulp_obj_list *dead);
/* Recovery: remove temporaries and unreferenced objects. */
int ulp_obj_recover(ulp_store *st);

/* ------------------------------------------------------------ reading
 * (reader.c, cache.c, readahead.c) */

typedef struct ulp_cflight ulp_cflight;
/* One thread's chain of decodes (a read, its reference reads, one
 * read-ahead job): what it waits for, to refuse a wait that would never
 * end; and, for read-ahead, when to give up. */
typedef struct ulp_ctask {
	ulp_cflight *waiting; /* under the cache mutex */
	_Atomic int *stop;    /* give up (-ECANCELED) once set; NULL: never */
} ulp_ctask;

int ulp_reader_new(ulp_store *st, ulp_reader **out);
void ulp_reader_free(ulp_reader *r);
/* Read logical bytes [off, off+len) of version vid (clipped to its size):
 * returns the count or -errno.  ra (may be NULL) is the handle's
 * read-ahead state.  Never call with st->mu held. */
ssize_t ulp_read_version(ulp_store *st, uint64_t vid, void *buf, size_t len,
                         uint64_t off, ulp_readahead *ra);
/* Decode bytes [0, size) of version vid into fd at the same offsets, a
 * few MiB at a time; stops with -ECANCELED once *stop (if given) is set. */
int ulp_version_to_fd(ulp_store *st, uint64_t vid, uint64_t size, int fd,
                      _Atomic int *stop);
/* Read-ahead work: decode chunk i of version vid into the cache, unless
 * it is there or being decoded; gives up once *stop is set. */
int ulp_reader_prefetch(ulp_store *st, uint64_t vid, size_t i,
                        _Atomic int *stop);
/* ulp_ref_read_fn over a version; opaque is a ulp_ref_ctx (task NULL: a
 * chain of its own). */
typedef struct ulp_ref_ctx {
	ulp_store *st;
	uint64_t vid;
	unsigned depth;
	ulp_ctask *task;
} ulp_ref_ctx;
int ulp_ref_read(void *opaque, uint64_t off, void *buf, size_t len);
/* ulp_encode_job.ref_chunk_hash over a ulp_ref_ctx: the decoded hash of
 * the version's chunk at exactly [off, off + len), from its index. */
int ulp_ref_chunk_hash(void *opaque, uint64_t off, uint32_t len,
                       uint64_t *xxh3);
/* The kind of version vid's content hash (ULP_HASH_FLAT or ULP_HASH_TREE,
 * as its object has it), or -errno. */
int ulp_version_hash_kind(ulp_store *st, uint64_t vid);
/* Forget the opened object of a version (rebased or deleted). */
void ulp_reader_forget(ulp_store *st, uint64_t vid);

/* Sequential read-ahead (readahead.c): a small pool of threads, started
 * on first use, that decode the chunks a sequential reader will want
 * next.  Stopping gives up decodes under way (prompt unmount). */
int ulp_ra_pool_new(ulp_store *st, unsigned threads, ulp_ra_pool **out);
/* Drop the queued work, give up the decodes under way and refuse new
 * work (store close: first, so that unmounting does not wait for them);
 * free joins the threads. */
void ulp_ra_pool_stop(ulp_ra_pool *p);
void ulp_ra_pool_free(ulp_ra_pool *p);
/* A read of chunks [first, last] of version vid, whose object is obj at
 * chain depth depth: when it continues a sequential run, queue the next
 * chunks (as many as the cache budget keeps until they are read). */
void ulp_ra_note(ulp_readahead *ra, uint64_t vid, const ulp_object *obj,
                 unsigned depth, size_t first, size_t last);

ulp_cache *ulp_cache_new(uint64_t cap_bytes);
void ulp_cache_free(ulp_cache *c);
typedef struct ulp_cbuf ulp_cbuf;
/* Whether the chunk (vid, off, len) is cached or being decoded. */
int ulp_cache_busy(ulp_cache *c, uint64_t vid, uint64_t off, uint32_t len);
/* The chunk (vid, off, len): 0 with *out set (cached, referenced; when
 * another task was decoding it, after waiting for that decode), 0 with
 * *claim set (nobody is decoding it: the caller must, then call
 * ulp_cache_complete), or the error of the decode waited for (-ELOOP when
 * waiting would deadlock: a reference cycle). */
int ulp_cache_take(ulp_cache *c, ulp_ctask *self, uint64_t vid, uint64_t off,
                   uint32_t len, ulp_cbuf **out, ulp_cflight **claim);
/* End a claim: publish b (filled; NULL on failure, err then the error)
 * to the cache and to the waiters.  Returns the cached buffer (referenced)
 * or NULL. */
ulp_cbuf *ulp_cache_complete(ulp_cache *c, ulp_cflight *f, ulp_cbuf *b,
                             int err);
/* A new, unpublished buffer of len bytes (NULL when out of memory),
 * counted against the budget until published or discarded. */
ulp_cbuf *ulp_cache_alloc(ulp_cache *c, uint64_t vid, uint64_t off,
                          uint32_t len);
void *ulp_cbuf_data(ulp_cbuf *b);
void ulp_cache_release(ulp_cache *c, ulp_cbuf *b);
/* Free an unpublished buffer (NULL: nothing). */
void ulp_cbuf_discard(ulp_cache *c, ulp_cbuf *b);
void ulp_cache_drop_version(ulp_cache *c, uint64_t vid);
typedef struct ulp_cache_stats {
	uint64_t bytes, hits, misses;
	uint64_t decodes; /* chunks decoded */
	uint64_t waits;   /* misses served by a decode already under way */
} ulp_cache_stats;
void ulp_cache_counters(ulp_cache *c, ulp_cache_stats *out);

/* ------------------------------------------------------------ versions
 * (versions.c; all with st->mu held, inside a transaction) */

/* The path of an inode ("" for the root, "a/b" otherwise) in a malloc()ed
 * string: 0 or -errno (-ENOENT when the inode has no entry). */
/* The path the history of the live file at path is recorded under: path
 * itself, or for a hard-linked file its oldest name's (malloc()ed into
 * *buf, freed by the caller).  mu held (link.c). */
const char *ulp_ns_history_path(ulp_store *st, const char *path, char **buf);
int ulp_ns_path_alloc(ulp_store *st, uint64_t ino, char **out);
/* The inode at path ("a/b", "" the root): 0, -ENOENT.  The one path
 * resolver of the store. */
int ulp_ns_resolve(ulp_store *st, const char *path, uint64_t *ino);
/* Whether path names an existing entry: 1, 0 or -errno. */
int ulp_ns_path_exists(ulp_store *st, const char *path);
/* Release the history of path (and, with subtree, of everything below it)
 * that is neither a current version nor pinned by a snapshot. */
/* The paths strictly below path sort (bytewise, as the catalog compares
 * them) in [*lo, *hi): "a/b/" to "a/b0"; for "" (the root), every path.
 * Both strings are malloc()ed. */
int ulp_path_range(const char *path, char **lo, char **hi);

/* A symlink's target from a query of (kind, target) (namespace.c; mu
 * held): as ulp_ns_readlink. */
int ulp_ns_target_of(ulp_store *st, sqlite3_stmt *s, char *buf, size_t size);

/* Within a snapshot's transaction (snap_tree.c): record every entry below
 * (ino, path) of snapshot snap, then, once all paths are in, the links
 * and extended attributes. */
int ulp_snap_tree_pin(ulp_store *st, int64_t snap, uint64_t ino,
                      const char *path);
int ulp_snap_tree_finish(ulp_store *st, int64_t snap);

/* A growing array of strings (util.c): strings collected under mu, to be
 * used after it is released. */
typedef struct ulp_strv {
	char **v;
	size_t n, cap;
} ulp_strv;
/* Append a copy of s (NULL: ""): 0 or -ENOMEM. */
int ulp_strv_add(ulp_strv *a, const char *s);
void ulp_strv_free(ulp_strv *a);
/* Within a rename's transaction: the current versions of live files at
 * old_path (or below it) take the corresponding path under new_path. */
int ulp_versions_repath(ulp_store *st, const char *old_path,
                        const char *new_path, int subtree);
int ulp_versions_release_path(ulp_store *st, const char *path, int subtree,
                              ulp_obj_list *dead);
/* A version stops being the current one of its file (a newer one was
 * committed, or the file is destroyed): it stays as history while its
 * path names an entry, else it is released.  The one rule for both. */
int ulp_versions_retire(ulp_store *st, uint64_t vid, ulp_obj_list *dead);
/* Release one version (no longer current). */
int ulp_versions_release(ulp_store *st, uint64_t vid, ulp_obj_list *dead);
/* Turn ghosts nothing depends on into deleted versions. */
int ulp_versions_settle(ulp_store *st, ulp_obj_list *dead);

/* The tensor map stored with a version (empty when it had none). */
int ulp_version_tmap_locked(ulp_store *st, uint64_t vid, ulp_tensor_map *out);
int ulp_version_get_locked(ulp_store *st, uint64_t vid, ulp_version_info *out);
/* Read a version row's columns (Q_VCOLS order) from a statement. */
void ulp_version_from_row(sqlite3_stmt *s, ulp_version_info *v);
#define ULP_VCOLS                                                         \
	"id, ino, seq, size, mtime, created, hash, ref, depth, keyframe," \
	" stored, state, layout, object, path"

/* ------------------------------------------------------------ reserve
 * (reserve.c; mu held) */

/* Give the reserve file back: 1 if there was one (retry), else 0. */
int ulp_reserve_release(ulp_store *st);
/* Allocate it again if it is missing and there is room. */
void ulp_reserve_restore(ulp_store *st);

/* gc: src/store/gc.h (its state is its own). */

/* ------------------------------------------------------------ tensor maps
 * (tmap.c): the map of every version is kept in the catalog so that a
 * later version can be planned against it without decoding it. */

int ulp_tmap_encode(const ulp_tensor_map *map, uint8_t **out, size_t *len);
int ulp_tmap_decode(const uint8_t *p, size_t len, ulp_tensor_map *out);

/* ------------------------------------------------------------ usage
 * (usage.c): encoder statistics kept per version (versions.estats). */

#define ULP_ESTATS_LEN (8 * (2 * ULP_DT_COUNT + 3))
/* The fields stats reports (bytes in/out per dtype, chunks per path) in
 * a fixed little-endian layout of ULP_ESTATS_LEN bytes. */
void ulp_estats_encode(const ulp_stats *s, uint8_t out[ULP_ESTATS_LEN]);
int ulp_estats_decode(const void *p, size_t len, ulp_stats *out);

#endif /* ULP_STORE_INTERNAL_H */
