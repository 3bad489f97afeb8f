/*
 * test_chains.c - unit tests of version history: every closed content is
 * a version, reverse-delta chains (the newest version standalone, older
 * ones coded against their successor), deletion and rotation, and stores
 * written before reverse chains.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "store/store.h"
#include "ulpfs/ulp.h"

#include "test_store_util.h"

TestSuite(chains, .init = setup, .fini = teardown);

typedef struct vlist {
	ulp_version_info v[64];
	int n;
} vlist;

static int collect(void *opaque, const ulp_version_info *v, const char *path)
{
	vlist *l = opaque;

	(void)path;
	if (v->state != ULP_VERSION_LIVE)
		return 0;
	cr_assert_lt(l->n, 64);
	l->v[l->n++] = *v;
	return 0;
}

static vlist live_versions(ulp_store *st, const char *path)
{
	vlist l = { .n = 0 };

	cr_assert_eq(ulp_version_list(st, path, collect, &l), 0);
	return l;
}

static ulp_store *open_settle(unsigned settle_ms)
{
	ulp_store_opts o = { 0 };

	o.settle_ms = settle_ms;
	o.encoder_threads = 2;
	o.cache_bytes = 8u << 20;
	return open_opts(&o);
}

/* ------------------------------------------------ every closed version */

/* Rewrites of one path in quick succession (O_TRUNC reopens, and saves
 * to a temporary name renamed over it) each land as a version, whatever
 * the settle delay; an append reopen continues the version it appends
 * to; the temporary name gets no history. */
static void rewrites_keep_every_version(unsigned settle_ms)
{
	ulp_store *st = open_settle(settle_ms);
	enum { N = 5 };
	sfile v[2 * N];

	for (int i = 0; i < 2 * N; i++) {
		v[i] = i ? st_copy(&v[i - 1]) : st_make(64 * 64, 32, 5);
		if (i)
			st_step(&v[i], 900 + (uint64_t)i);
	}
	for (int i = 0; i < N; i++)
		put_file(st, ULP_ROOT_INO, "latest.safetensors", v[i].p,
		         v[i].len);
	for (int i = N; i < 2 * N; i++) {
		put_file(st, ULP_ROOT_INO, "tmp.safetensors", v[i].p, v[i].len);
		cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "tmp.safetensors",
		                           ULP_ROOT_INO, "latest.safetensors",
		                           0),
		             0);
	}
	/* An append within the settle delay: the same version grows. */
	uint64_t ino = put_file(st, ULP_ROOT_INO, "log.txt", "one\n", 4);
	ulp_file *f;
	cr_assert_eq(ulp_file_open(st, ino, O_WRONLY | O_APPEND, &f, NULL), 0);
	write_all(f, "two\n", 4, 4);
	cr_assert_eq(ulp_file_flush(f), 0);
	ulp_file_release(f);
	sync_ok(st);

	vlist l = live_versions(st, "latest.safetensors");
	cr_assert_eq(l.n, 2 * N, "settle %u: %d versions of %d", settle_ms, l.n,
	             2 * N);
	for (int i = 0; i < l.n; i++)
		expect_version(st, l.v[i].id, v[i].p, v[i].len);
	cr_assert_eq(live_versions(st, "tmp.safetensors").n, 0);
	/* With a settle delay of a millisecond the first content may commit
	 * before the append reopens it; then the append is a second version
	 * of its own, and nothing is lost either way.  With a longer delay
	 * the append must continue the version. */
	l = live_versions(st, "log.txt");
	if (settle_ms < 100 && l.n == 2)
		expect_version(st, l.v[0].id, "one\n", 4);
	else
		cr_assert_eq(l.n, 1, "settle %u, append: %d versions",
		             settle_ms, l.n);
	expect_version(st, l.v[l.n - 1].id, "one\ntwo\n", 8);
	check_integrity(st);
	ulp_store_close(st);
	for (int i = 0; i < 2 * N; i++)
		free(v[i].p);
}

Test(chains, rewrites_keep_every_version_settle_1)
{
	rewrites_keep_every_version(1);
}

Test(chains, rewrites_keep_every_version_settle_default)
{
	rewrites_keep_every_version(0);
}

Test(chains, rewrites_keep_every_version_settle_2000)
{
	rewrites_keep_every_version(2000);
}

/* ------------------------------------------------ reverse chains */

/* A lineage of n checkpoints, d/ckpt-<i>/m.safetensors (the lineage
 * follows the tensor layout across directories, as HF Trainer's
 * checkpoint-N/ do).  vers[i] is what version i holds. */
static void write_lineage(ulp_store *st, int n, sfile *vers, uint64_t *dirs)
{
	sfile v = st_make(64 * 512, 128, 1234);

	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "ckpt-%d", i + 1);
		dirs[i] = mkdir_in(st, ULP_ROOT_INO, name);
		put_file(st, dirs[i], "m.safetensors", v.p, v.len);
		sync_ok(st);
		vers[i] = st_copy(&v);
		st_step(&v, 3000 + (uint64_t)i);
	}
	free(v.p);
}

static ulp_version_info ckpt_version(ulp_store *st, int i)
{
	char path[64];
	ulp_version_info v;

	snprintf(path, sizeof path, "ckpt-%d/m.safetensors", i + 1);
	cr_assert_eq(ulp_version_find(st, path, 0, &v), 0, "%s", path);
	return v;
}

/* Every live checkpoint exact; no version more than k - 1 links from a
 * standalone one; the newest live one standalone. */
static void check_lineage(ulp_store *st, int n, const sfile *vers,
                          const int *gone, unsigned k)
{
	int newest = -1;

	for (int i = 0; i < n; i++) {
		if (gone[i])
			continue;
		ulp_version_info v = ckpt_version(st, i);
		expect_version(st, v.id, vers[i].p, vers[i].len);
		cr_assert_lt(v.depth, k, "ckpt-%d at depth %u (k %u)", i + 1,
		             v.depth, k);
		cr_assert(v.ref == 0 || v.ref > v.id,
		          "ckpt-%d coded against an older version", i + 1);
		newest = i;
	}
	cr_assert_eq(ckpt_version(st, newest).ref, 0, "newest not standalone");
}

static uint64_t dependants_of(ulp_store *st, int n, const int *gone,
                              uint64_t vid)
{
	uint64_t c = 0;

	for (int i = 0; i < n; i++)
		if (!gone[i] && ckpt_version(st, i).ref == vid)
			c++;
	return c;
}

static ulp_store_stats stats_of(ulp_store *st)
{
	ulp_store_stats s;

	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	return s;
}

static void lineage_at_k(unsigned k)
{
	enum { N = 20 };
	ulp_store *st = open_k(k);
	sfile vers[N];
	uint64_t dirs[N];
	int gone[N] = { 0 };

	write_lineage(st, N, vers, dirs);
	settle_all(st);
	check_lineage(st, N, vers, gone, k);
	int standalone = 0;
	for (int i = 0; i < N; i++)
		standalone += ckpt_version(st, i).ref == 0;
	cr_assert_eq(standalone, (N + (int)k - 1) / (int)k,
	             "k %u: %d standalone versions", k, standalone);
	cr_assert_eq(stats_of(st).rebases, 0);
	check_integrity(st);
	ulp_store_close(st);

	st = open_k(k);
	check_lineage(st, N, vers, gone, k);
	/* Delete the oldest, the newest, one in the middle: only what was
	 * coded against the deleted version is rebased. */
	static const int order[3] = { 0, N - 1, N / 2 };
	for (int o = 0; o < 3; o++) {
		int i = order[o];
		char name[32];
		uint64_t vid = ckpt_version(st, i).id;
		uint64_t before = stats_of(st).rebases;
		uint64_t deps = dependants_of(st, N, gone, vid);
		snprintf(name, sizeof name, "ckpt-%d", i + 1);
		cr_assert_eq(ulp_ns_unlink(st, dirs[i], "m.safetensors"), 0);
		cr_assert_eq(ulp_ns_rmdir(st, ULP_ROOT_INO, name), 0);
		gone[i] = 1;
		settle_all(st);
		cr_assert_eq(
			stats_of(st).rebases - before, deps,
			"k %u, deleting ckpt-%d: %llu rebases, %llu "
			"dependants",
			k, i + 1,
			(unsigned long long)(stats_of(st).rebases - before),
			(unsigned long long)deps);
		if (i == 0)
			cr_assert_eq(deps, 0, "the oldest is a leaf");
		check_lineage(st, N, vers, gone, k);
		check_integrity(st);
	}
	ulp_store_close(st);
	st = open_k(k);
	check_lineage(st, N, vers, gone, k);
	check_integrity(st);
	ulp_store_close(st);
	for (int i = 0; i < N; i++)
		free(vers[i].p);
}

Test(chains, lineage_of_20_at_keyframe_1)
{
	lineage_at_k(1);
}

Test(chains, lineage_of_20_at_keyframe_2)
{
	lineage_at_k(2);
}

Test(chains, lineage_of_20_at_keyframe_16)
{
	lineage_at_k(16);
}

/* A rebase (and a flip: the same routine) decodes the version straight
 * into the encoder through the cache: nothing is written to staging/. */
Test(chains, reencodes_write_nothing_to_staging)
{
	enum { N = 4 };
	ulp_store *st = open_k(16);
	sfile vers[N];
	uint64_t dirs[N];
	int gone[N] = { 0 };
	char dir[400];

	write_lineage(st, N, vers, dirs);
	settle_all(st);
	uint64_t vid = ckpt_version(st, 1).id;
	cr_assert_eq(dependants_of(st, N, gone, vid), 1, "ckpt-1 on ckpt-2");
	snprintf(dir, sizeof dir, "%s/staging", store_dir());
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	cr_assert(in >= 0, "inotify: %s", strerror(errno));
	cr_assert(inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO) >= 0,
	          "watch %s: %s", dir, strerror(errno));
	uint64_t before = stats_of(st).rebases;
	cr_assert_eq(ulp_ns_unlink(st, dirs[1], "m.safetensors"), 0);
	gone[1] = 1;
	settle_all(st);
	cr_assert_eq(stats_of(st).rebases - before, 1, "ckpt-1 rebased");
	char ev[4096] __attribute__((aligned(8)));
	ssize_t n = read(in, ev, sizeof ev);
	cr_assert(n < 0 && errno == EAGAIN, "%zd bytes of events in staging/%s",
	          n, n > 0 ? ((struct inotify_event *)ev)->name : "");
	close(in);
	check_lineage(st, N, vers, gone, 16);
	check_integrity(st);
	ulp_store_close(st);
	for (int i = 0; i < N; i++)
		free(vers[i].p);
}

/* HF Trainer with save_total_limit=2: save checkpoint-N, then rm -rf the
 * oldest beyond two.  The oldest is always a leaf: no rebase, ever, and
 * the store holds what the two kept checkpoints need. */
Test(chains, rotation_does_no_rebase)
{
	enum { N = 20 };
	ulp_store *st = open_default();
	sfile v = st_make(64 * 1024, 256, 99);
	sfile kept[N];
	uint64_t dirs[N];

	for (int n = 0; n < N; n++) {
		char name[32], json[64];
		snprintf(name, sizeof name, "checkpoint-%d", n + 1);
		dirs[n] = mkdir_in(st, ULP_ROOT_INO, name);
		put_file(st, dirs[n], "model.safetensors", v.p, v.len);
		int jl = snprintf(json, sizeof json, "{\"global_step\": %d}\n",
		                  (n + 1) * 100);
		put_file(st, dirs[n], "trainer_state.json", json, (size_t)jl);
		kept[n] = st_copy(&v);
		sync_ok(st);
		if (n >= 2) {
			snprintf(name, sizeof name, "checkpoint-%d", n - 1);
			uint64_t d = dirs[n - 2];
			cr_assert_eq(ulp_ns_unlink(st, d, "model.safetensors"),
			             0);
			cr_assert_eq(ulp_ns_unlink(st, d, "trainer_state.json"),
			             0);
			cr_assert_eq(ulp_ns_rmdir(st, ULP_ROOT_INO, name), 0);
			free(kept[n - 2].p);
		}
		st_step(&v, 7000 + (uint64_t)n);
	}
	settle_all(st);
	ulp_store_stats s = stats_of(st);
	cr_assert_eq(s.rebases, 0, "%llu rebases",
	             (unsigned long long)s.rebases);
	cr_assert_geq(s.flips, N - 1, "%llu flips",
	              (unsigned long long)s.flips);
	cr_assert_eq(s.versions[ULP_VERSION_LIVE], 4);
	cr_assert_eq(s.versions[ULP_VERSION_GHOST], 0);
	ulp_version_info newest =
		current(st, lookup(st, dirs[N - 1], "model.safetensors"));
	ulp_version_info older =
		current(st, lookup(st, dirs[N - 2], "model.safetensors"));
	cr_assert_eq(newest.ref, 0);
	cr_assert_eq(older.ref, newest.id);
	size_t cnt;
	uint64_t bytes = object_bytes(&cnt);
	cr_assert_eq(cnt, 4, "%zu objects", cnt);
	cr_assert_lt(bytes, newest.stored * 3 / 2,
	             "store %llu for a standalone checkpoint of %llu",
	             (unsigned long long)bytes,
	             (unsigned long long)newest.stored);
	for (int n = N - 2; n < N; n++) {
		expect_content(st, lookup(st, dirs[n], "model.safetensors"),
		               kept[n].p, kept[n].len);
		free(kept[n].p);
	}
	check_integrity(st);
	ulp_store_close(st);
	free(v.p);
}

/* ------------------------------------------------ older stores */

/* tests/data/store-v3 (see its README): forward chains, catalog schema
 * 3, written by the release before reverse chains. */
static void copy_old_store(void)
{
	char cmd[1400];

	/* chmod: under make distcheck the source tree is read-only */
	snprintf(cmd, sizeof cmd,
	         "cp -r '%s/store-v3' '%s' && chmod -R u+w '%s'", ULP_TEST_DATA,
	         store_dir(), store_dir());
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

typedef struct links {
	int forward, reverse, live;
} links;

static int count_links(void *opaque, const ulp_version_info *v,
                       const char *path)
{
	links *l = opaque;

	(void)path;
	if (v->state != ULP_VERSION_LIVE)
		return 0;
	l->live++;
	if (v->ref && v->ref < v->id)
		l->forward++;
	if (v->ref > v->id)
		l->reverse++;
	return 0;
}

static links links_of(ulp_store *st)
{
	links l = { 0, 0, 0 };

	cr_assert_eq(ulp_version_list(st, NULL, count_links, &l), 0);
	return l;
}

/* Every live version decodes to the hash it was committed with. */
static void read_all(ulp_store *st)
{
	integ g = { st, 0, 0 };

	cr_assert_eq(ulp_version_list(st, NULL, integ_one, &g), 0);
	cr_assert_eq(g.objects, 10);
}

/* It opens (migrated), reads every version exactly, keeps its forward
 * chains until a commit turns the newest one of a lineage around
 * (lazily) or gc converts them all; every version is exact after each
 * step and after a reopen. */
Test(chains, previous_format_store_reads_and_converts)
{
	copy_old_store();
	ulp_store *st = open_k(3);
	links l = links_of(st);
	cr_assert_eq(l.live, 10);
	cr_assert_eq(l.forward, 6, "%d forward links", l.forward);
	cr_assert_eq(l.reverse, 0);
	read_all(st);

	/* A new version of model.safetensors: it is standalone, and the
	 * newest forward chain of its lineage (v5 -> v4) turns around. */
	uint64_t ino = lookup(st, ULP_ROOT_INO, "model.safetensors");
	size_t len;
	uint8_t *p = get_file(st, ino, &len);
	p[len - 1] ^= 1;
	put_file(st, ULP_ROOT_INO, "model.safetensors", p, len);
	ulp_store_close(st); /* commits, then the flips it caused */
	st = open_k(3);
	l = links_of(st);
	cr_assert_eq(l.live, 11);
	cr_assert_eq(l.forward, 5, "%d forward links left", l.forward);
	cr_assert_eq(l.reverse, 2, "%d reverse links", l.reverse);
	cr_assert_eq(current(st, ino).ref, 0);
	expect_content(st, ino, p, len);
	ulp_version_info v4, v5;
	cr_assert_eq(ulp_version_find(st, "model.safetensors", 4, &v4), 0);
	cr_assert_eq(ulp_version_find(st, "model.safetensors", 5, &v5), 0);
	cr_assert_eq(v5.ref, current(st, ino).id);
	cr_assert_eq(v4.ref, v5.id);

	/* gc converts the rest. */
	cr_assert_eq(ulp_store_gc(st), 0);
	l = links_of(st);
	cr_assert_eq(l.forward, 0, "%d forward links after gc", l.forward);
	check_integrity(st);
	ulp_store_close(st);
	st = open_k(3);
	cr_assert_eq(links_of(st).forward, 0);
	check_integrity(st);
	ulp_store_close(st);
	free(p);
}

/* ------------------------------------------------ crashes in flips */

/* kill -9 inside flips, at points drawn from a seed (printed; set
 * ULPFS_TEST_SEED to replay): once the new object is durable but before
 * the transaction, or after it but before the old object is removed.
 * After each, the store opens, every checkpoint closed before the crash
 * is exact, and no object is left that no version names. */
Test(chains, kill9_inside_flips)
{
	/* At keyframe 3, M new versions make at least (M - 1) * 2 / 3
	 * flips, the first round included: the crash point is reached. */
	enum { ROUNDS = 5, M = 6, FLIPS = 3 };
	const char *env = getenv("ULPFS_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	sfile base = st_make(64 * 512, 128, 4242);
	sfile vers[ROUNDS * M];
	int closed[ROUNDS * M] = { 0 }, nclosed = 0;

	fprintf(stderr, "kill9_inside_flips: ULPFS_TEST_SEED=%llu\n",
	        (unsigned long long)seed);
	for (int k = 0; k < ROUNDS * M; k++) {
		vers[k] = st_copy(k ? &vers[k - 1] : &base);
		st_step(&vers[k], 500 + (uint64_t)k);
	}
	for (int r = 0; r < ROUNDS; r++) {
		unsigned nflip = 1 + (unsigned)(rng_next(&seed) % FLIPS);
		unsigned stage = 1 + (unsigned)(rng_next(&seed) % 2);
		int pfd[2];
		cr_assert_eq(pipe(pfd), 0);
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			char crash[32];
			ulp_store_opts o = { 0 };
			ulp_store *st;
			close(pfd[0]);
			snprintf(crash, sizeof crash, "%u:%u", nflip, stage);
			setenv("ULPFS_TEST_CRASH_FLIP", crash, 1);
			o.settle_ms = 1;
			o.encoder_threads = 2;
			o.keyframe_every = 3;
			if (ulp_store_open(store_dir(), &o, &st))
				_exit(2);
			for (int i = 0; i < M; i++) {
				int k = r * M + i;
				char name[32];
				ulp_attr at;
				ulp_file *f;
				snprintf(name, sizeof name, "ckpt-%d", k);
				if (ulp_ns_mkdir(st, ULP_ROOT_INO, name, 0755,
				                 0, 0, &at) ||
				    ulp_ns_create(st, at.ino, "m.safetensors",
				                  0644, 0, 0, &at) ||
				    ulp_file_open(st, at.ino, O_WRONLY, &f,
				                  NULL) ||
				    ulp_file_write(f, vers[k].p, vers[k].len,
				                   0) != (ssize_t)vers[k].len)
					_exit(3);
				ulp_file_release(f);
				if (ulp_store_sync(st))
					_exit(4);
				if (write(pfd[1], &k, sizeof k) != sizeof k)
					_exit(5);
			}
			ulp_store_close(st); /* the last flips: still crashes */
			_exit(0);
		}
		close(pfd[1]);
		int status, k;
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		          "round %d (flip %u, stage %u): the child was not "
		          "killed (status %d)",
		          r, nflip, stage, status);
		while (read(pfd[0], &k, sizeof k) == sizeof k) {
			closed[k] = 1;
			nclosed++;
		}
		close(pfd[0]);

		ulp_store *st = open_k(3);
		for (k = 0; k < ROUNDS * M; k++) {
			char path[64];
			if (!closed[k])
				continue;
			ulp_version_info v;
			snprintf(path, sizeof path, "ckpt-%d/m.safetensors", k);
			cr_assert_eq(ulp_version_find(st, path, 0, &v), 0,
			             "round %d (flip %u, stage %u): %s lost", r,
			             nflip, stage, path);
			expect_version(st, v.id, vers[k].p, vers[k].len);
		}
		check_integrity(st); /* also: no orphan object */
		ulp_store_close(st);
	}
	cr_assert_gt(nclosed, ROUNDS, "too few checkpoints got written");
	for (int k = 0; k < ROUNDS * M; k++)
		free(vers[k].p);
	free(base.p);
}
