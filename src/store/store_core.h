/*
 * store_core.h - what every module of the store shares (src/store only;
 * src/store/store.h is the API): the store lock, the catalog handle and
 * the directories, the in-memory inode, and the small helpers of util.c.
 * Each module declares its own functions in a header of its own.
 *
 * Layers, lowest first: a module includes the headers of its own layer
 * and of the layers below it, and calls only functions defined in the
 * files of those layers, but for the calls upward listed after the table
 * (tests/store_layers.sh checks the includes against the sources and the
 * calls against the built objects).
 *
 *   core       store.h (the public types), store_core.h (util.c),
 *              catalog.h (catalog.c, cat_rows.c), tmap.h (tmap.c),
 *              remote.h, acl_form.h, bucket_reps.h (bucket_reps.c,
 *              cat_copy.c): a bucket store's rows and catalog copies
 *   versions   versions.h (versions.c): version rules and paths;
 *              vperm.h (vperm.c): who may read a version
 *   cache      cache.h (cache.c): decoded chunks; a leaf
 *   reader     reader.h (reader.c, readahead.c), reader_obj.h
 *              (reader_obj.c): decoding versions
 *   objects    objects.h (objects.c): object files
 *   reserve    reserve.h (reserve.c)
 *   staging    overlay.h, staging.h (staging.c, overlay.c, copyup.c,
 *              backing.c), plain.h (plain.c): plain newest versions
 *   encoder    encoder.h (encoder.c), queue.h (queue.c), writers.h
 *              (writers.c), side.h (side.c)
 *   gc         gc.h (gc.c)
 *   inodes     inode.h (inode.c)
 *   namespace  ns_internal.h (namespace.c, link.c, rename.c, setattr.c,
 *              acl.c, xattr.c), snap_tree.h (snap_tree.c), snapshot.c,
 *              history.c, version_api.c, vperm_api.c, delta_api.c,
 *              file.c
 *   api        recover.h (store.c, private.c), store_api.c
 *
 * Calls upward that remain (files: headers): none.  Where a lower layer
 * must reach an upper one, the upper one registers a hook in ulp_store
 * when it starts (gc_kick, inode_put).
 *
 * Every ulp_store_* entry point of store.h is in store_api.c; the
 * namespace, file, version and snapshot ones are in their modules, and
 * delta_api.c holds the versions coded again for a remote's own copy.
 * encoder.c holds the tensor map reader of versions.h, link.c its
 * ulp_ns_history_path; no file of a lower layer calls them.
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
#ifndef ULP_STORE_CORE_H
#define ULP_STORE_CORE_H

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
 * dot (objects/.tmp-*; staging/.rebase-* from older releases) and are
 * removed on open. */
#define ULP_TMP_PREFIX ".tmp-"
/* staging/<ino> (util.c). */
void ulp_stage_name(uint64_t ino, char buf[32]);

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
	uint64_t acct;         /* bytes counted in the staged bytes (the
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

	/* Encode queue: where the file is (ULP_Q_*), read by staging and
	 * the writers; the rest, its place in the queue and its failures,
	 * is queue.c's own. */
	int qstate;
	struct ulp_qentry *q;
#ifndef NDEBUG
	unsigned live;                 /* ULP_INODE_LIVE until freed */
	_Atomic unsigned data_readers; /* holders of data, for ... */
	_Atomic pthread_t data_writer; /* ... ulp_data_*()'s checks */
#endif
} ulp_inode;

/* The data lock, taken and released through these.  Unless NDEBUG they
 * check its ownership: an unlock without a hold, or any use of a freed
 * inode's lock, fails there, instead of leaving the lock's count wrong
 * for a later writer to wait on for ever. */
#define ULP_INODE_LIVE 0x11a0deu
static inline void ulp_data_rdlock(ulp_inode *in)
{
	assert(in->live == ULP_INODE_LIVE);
	pthread_rwlock_rdlock(&in->data);
#ifndef NDEBUG
	atomic_fetch_add(&in->data_readers, 1);
#endif
}

static inline void ulp_data_wrlock(ulp_inode *in)
{
	assert(in->live == ULP_INODE_LIVE);
	pthread_rwlock_wrlock(&in->data);
#ifndef NDEBUG
	assert(atomic_load(&in->data_readers) == 0);
	atomic_store(&in->data_writer, pthread_self());
#endif
}

static inline void ulp_data_unlock(ulp_inode *in)
{
#ifndef NDEBUG
	assert(in->live == ULP_INODE_LIVE);
	if (pthread_equal(atomic_load(&in->data_writer), pthread_self())) {
		atomic_store(&in->data_writer, (pthread_t)0);
	} else {
		unsigned held = atomic_fetch_sub(&in->data_readers, 1);
		assert(held > 0);
		(void)held;
	}
#endif
	pthread_rwlock_unlock(&in->data);
}

typedef struct ulp_cache ulp_cache;
typedef struct ulp_reader ulp_reader;
typedef struct ulp_queue ulp_queue;
typedef struct ulp_qentry ulp_qentry; /* queue.c */
typedef struct ulp_itab ulp_itab;
typedef struct ulp_ra_pool ulp_ra_pool;
typedef struct ulp_gc ulp_gc;
typedef struct ulp_staging ulp_staging;

/* What the modules share is here; each module's own state is a struct
 * defined in its .c file, of which the store holds a pointer. */
struct ulp_store {
	char *dir;
	int dir_fd, obj_fd, stg_fd, lock_fd;
	ulp_store_opts opts;

	pthread_mutex_t mu;
	ulp_catalog *cat;
	/* An inode's state changed: an encode finished (committed or not), a
	 * stage transition ended, a writer released its handle. */
	pthread_cond_t done_cv;

	/* Module state, opaque outside its module. */
	ulp_itab *itab;       /* in-memory inodes (inode.c) */
	ulp_queue *queue;     /* the encode queue and its threads (queue.c) */
	ulp_staging *staging; /* accounting behind the staging limit
	                         (staging.c) */
	ulp_gc *gc;           /* the background re-encoder (gc.c) */
	/* Called (mu held) where a lower layer leaves gc work, a version to
	 * flip or a ghost to remove: gc.c sets it while its thread runs, so
	 * that the layers below it need not call up (ulp_gc_note_work). */
	void (*gc_kick)(ulp_store *st);
	/* Drops a ref of an in-memory inode (mu held): inode.c's
	 * ulp_inode_put, set with the inode table at open, so that the
	 * encode queue (a layer below) can let go of the refs it holds. */
	void (*inode_put)(ulp_store *st, ulp_inode *in);
	/* The store's thread pool (encoder_threads threads): the codec's
	 * chunk workers, the encoders and read-ahead all run on it. */
	ulp_pool *pool;
	ulp_reader *reader; /* opened objects (reader.c) */
	ulp_cache *cache;   /* decoded chunks (cache.c) */
	ulp_ra_pool *ra;    /* read-ahead threads (readahead.c) */
	/* Passthrough admission (file.c): the admitted writers, open. */
	struct ulp_file *pt_admitted;
	int reserve_present; /* STORE/reserve is allocated (reserve.c; mu) */

	/* Figures the modules count and ulp_store_stats_get reports. */
	_Atomic uint64_t stat_commits, stat_discards; /* encoder.c */
	/* gc.c: rebases, and flips of versions into reverse deltas */
	_Atomic uint64_t stat_rebases, stat_flips;
	_Atomic uint64_t stat_readahead; /* chunks queued (readahead.c) */
};

/* ------------------------------------------------------------ helpers */

/* Tell the background re-encoder, if running, that ghosts or flips may
 * be pending (mu held); one not started yet starts with a full pass. */
static inline void ulp_gc_note_work(ulp_store *st)
{
	ULP_MU_HELD(st);
	if (st->gc_kick)
		st->gc_kick(st);
}

int64_t ulp_now_ns(void);  /* CLOCK_REALTIME */
int64_t ulp_mono_ns(void); /* CLOCK_MONOTONIC */
/* pthread_cond_init of a condition variable whose timed waits count on
 * CLOCK_MONOTONIC (deadlines from ulp_mono_ns); 0 or an errno. */
int ulp_cond_init_mono(pthread_cond_t *cv);
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

/* A growing array of strings (util.c): strings collected under mu, to be
 * used after it is released. */
typedef struct ulp_strv {
	char **v;
	size_t n, cap;
} ulp_strv;
/* Append a copy of s (NULL: ""): 0 or -ENOMEM. */
int ulp_strv_add(ulp_strv *a, const char *s);
void ulp_strv_free(ulp_strv *a);

#endif /* ULP_STORE_CORE_H */
