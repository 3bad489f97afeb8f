/*
 * test_store.c - unit tests of the store (src/store): namespace, staging,
 * encoding, reading, rename patterns, ghosts and rebasing, recovery after
 * a crash, concurrency and the staging limit.
 *
 * Each test works in its own temporary directory (removed at the end) and
 * drives the store through src/store/store.h only, as the FUSE layer does.
 * Safetensors files are built here; "training steps" change a fraction of
 * their elements by a few ULPs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "store/store.h"
#include "ulpfs/ulp.h"

#include "test_store_util.h"

TestSuite(store, .init = setup, .fini = teardown);

/* ------------------------------------------------------------ basics */

Test(store, write_sync_read_and_delta)
{
	ulp_store *st = open_default();
	sfile v1 = st_make(64 * 2048, 4096, 1);
	uint64_t ino =
		put_file(st, ULP_ROOT_INO, "model.safetensors", v1.p, v1.len);

	/* Served from staging before the commit, exact after it. */
	expect_content(st, ino, v1.p, v1.len);
	sync_ok(st);
	ulp_version_info a = current(st, ino);
	cr_assert(a.keyframe);
	cr_assert_eq(a.ref, 0);
	cr_assert_eq(a.seq, 1);
	cr_assert_eq(a.size, v1.len);
	cr_assert_neq(a.layout, 0, "safetensors layout not recognised");
	expect_content(st, ino, v1.p, v1.len);

	sfile v2 = st_copy(&v1);
	st_step(&v2, 2);
	put_file(st, ULP_ROOT_INO, "model.safetensors", v2.p, v2.len);
	settle_all(st);
	/* The newest is standalone, the first now a delta against it. */
	ulp_version_info b = current(st, ino);
	cr_assert_eq(b.ref, 0, "newest version not standalone");
	cr_assert(b.keyframe);
	cr_assert_eq(b.seq, 2);
	cr_assert_eq(ulp_version_get(st, a.id, &a), 0);
	cr_assert_eq(a.ref, b.id, "first version not coded against second");
	cr_assert_eq(a.depth, 1);
	cr_assert(!a.keyframe);
	cr_assert_lt(a.stored * 3, b.stored,
	             "delta not much smaller: %llu vs %llu",
	             (unsigned long long)a.stored,
	             (unsigned long long)b.stored);
	expect_content(st, ino, v2.p, v2.len);
	/* History stays readable. */
	expect_version(st, a.id, v1.p, v1.len);

	/* Same bytes again: no new version. */
	put_file(st, ULP_ROOT_INO, "model.safetensors", v2.p, v2.len);
	sync_ok(st);
	cr_assert_eq(current(st, ino).id, b.id);

	ulp_attr at;
	cr_assert_eq(ulp_ns_getattr(st, ino, &at), 0);
	cr_assert_eq(at.size, v2.len);
	cr_assert(S_ISREG(at.mode));
	cr_assert_eq(at.nlink, 1);
	ulp_store_close(st);
	free(v1.p);
	free(v2.p);
}

Test(store, empty_and_generic_files)
{
	ulp_store *st = open_default();
	uint8_t junk[100000];
	ulp_attr a;

	fill_random(junk, sizeof junk, 7);
	cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, "empty", 0600, 0, 0, &a),
	             0);
	uint64_t e = a.ino;
	uint64_t g = put_file(st, ULP_ROOT_INO, "blob", junk, sizeof junk);
	sync_ok(st);
	expect_content(st, e, "", 0);
	expect_content(st, g, junk, sizeof junk);
	cr_assert_eq(current(st, g).layout, 0);
	cr_assert_eq(current(st, e).size, 0);
	ulp_store_close(st);
}

Test(store, copy_up_then_partial_overwrite)
{
	ulp_store *st = open_default();
	sfile v1 = st_make(64 * 1024, 1000, 3);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "f", v1.p, v1.len);
	ulp_file *f;
	int keep = -1;

	sync_ok(st);
	ulp_version_info a = current(st, ino);
	cr_assert_eq(ulp_file_open(st, ino, O_RDONLY, &f, &keep), 0);
	cr_assert_eq(keep, 1, "committed content may stay in the page cache");
	ulp_file_release(f);

	cr_assert_eq(ulp_file_open(st, ino, O_RDWR, &f, &keep), 0);
	cr_assert_eq(keep, 0);
	uint8_t buf[64];
	cr_assert_eq(ulp_file_read(f, buf, sizeof buf, 1000),
	             (ssize_t)sizeof buf);
	cr_assert(memcmp(buf, v1.p + 1000, sizeof buf) == 0);
	write_all(f, "hello", 5, 5000);
	memcpy(v1.p + 5000, "hello", 5);
	cr_assert_eq(ulp_file_read(f, buf, 5, 5000), 5);
	cr_assert(memcmp(buf, "hello", 5) == 0);
	cr_assert_eq(ulp_file_fsync(f, 0), 0);
	ulp_file_release(f);
	settle_all(st);
	expect_content(st, ino, v1.p, v1.len);
	ulp_version_info b = current(st, ino);
	cr_assert_eq(ulp_version_get(st, a.id, &a), 0);
	cr_assert_eq(a.ref, b.id);
	cr_assert_lt(a.stored * 10, b.stored);
	ulp_store_close(st);
	free(v1.p);
}

Test(store, truncate_grow_shrink)
{
	ulp_store *st = open_default();
	uint8_t data[300000];
	ulp_attr set = { 0 }, out;
	ulp_file *f;

	fill_random(data, sizeof data, 11);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "t", data, sizeof data);
	sync_ok(st);

	/* Shrink a committed file (copy-up + truncate). */
	set.size = 1000;
	cr_assert_eq(ulp_ns_setattr(st, ino, &set, ULP_SET_SIZE, &out), 0);
	cr_assert_eq(out.size, 1000);
	expect_content(st, ino, data, 1000);
	sync_ok(st);
	expect_content(st, ino, data, 1000);
	cr_assert_eq(current(st, ino).size, 1000);

	/* Grow: zeros. */
	set.size = 5000;
	cr_assert_eq(ulp_ns_setattr(st, ino, &set, ULP_SET_SIZE, &out), 0);
	uint8_t *want = calloc(1, 5000);
	cr_assert(want);
	memcpy(want, data, 1000);
	expect_content(st, ino, want, 5000);
	sync_ok(st);
	expect_content(st, ino, want, 5000);

	/* safetensors writers: ftruncate to the full size first, then fill
	 * in, out of order. */
	cr_assert_eq(ulp_file_open(st, ino, O_WRONLY | O_TRUNC, &f, NULL), 0);
	set.size = sizeof data;
	cr_assert_eq(ulp_ns_setattr(st, ino, &set, ULP_SET_SIZE, &out), 0);
	write_all(f, data + 150000, 150000, 150000);
	write_all(f, data, 150000, 0);
	ulp_file_release(f);
	sync_ok(st);
	expect_content(st, ino, data, sizeof data);

	/* Truncate to 0 and to the same size. */
	set.size = sizeof data;
	cr_assert_eq(ulp_ns_setattr(st, ino, &set, ULP_SET_SIZE, &out), 0);
	uint64_t vid = current(st, ino).id;
	sync_ok(st);
	cr_assert_eq(current(st, ino).id, vid, "same size made a version");
	set.size = 0;
	cr_assert_eq(ulp_ns_setattr(st, ino, &set, ULP_SET_SIZE, &out), 0);
	sync_ok(st);
	expect_content(st, ino, "", 0);

	/* Not on directories. */
	cr_assert_eq(ulp_ns_setattr(st, ULP_ROOT_INO, &set, ULP_SET_SIZE, &out),
	             -EISDIR);
	free(want);
	ulp_store_close(st);
}

Test(store, sparse_out_of_order_and_append)
{
	ulp_store *st = open_default();
	ulp_attr a;
	ulp_file *f;
	uint8_t *want = calloc(1, 1 << 20);

	cr_assert(want);
	cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, "s", 0644, 0, 0, &a), 0);
	cr_assert_eq(ulp_file_open(st, a.ino, O_WRONLY, &f, NULL), 0);
	write_all(f, "tail", 4, (1 << 20) - 4);
	write_all(f, "mid", 3, 500000);
	write_all(f, "head", 4, 0);
	memcpy(want + (1 << 20) - 4, "tail", 4);
	memcpy(want + 500000, "mid", 3);
	memcpy(want, "head", 4);
	ulp_file_release(f);
	expect_content(st, a.ino, want, 1 << 20);
	sync_ok(st);
	expect_content(st, a.ino, want, 1 << 20);

	/* O_APPEND: writes land at the end whatever offset is given. */
	cr_assert_eq(ulp_file_open(st, a.ino, O_WRONLY | O_APPEND, &f, NULL),
	             0);
	cr_assert_eq(ulp_file_write(f, "AB", 2, 0), 2);
	cr_assert_eq(ulp_file_write(f, "CD", 2, 7), 2);
	ulp_file_release(f);
	sync_ok(st);
	uint8_t *want2 = malloc((1 << 20) + 4);
	cr_assert(want2);
	memcpy(want2, want, 1 << 20);
	memcpy(want2 + (1 << 20), "ABCD", 4);
	expect_content(st, a.ino, want2, (1 << 20) + 4);

	/* Reads past the end. */
	cr_assert_eq(ulp_file_open(st, a.ino, O_RDONLY, &f, NULL), 0);
	uint8_t b[8];
	cr_assert_eq(ulp_file_read(f, b, 8, (1 << 20) + 2), 2);
	cr_assert_eq(ulp_file_read(f, b, 8, (1 << 20) + 100), 0);
	cr_assert_eq(ulp_file_write(f, "x", 1, 0), -EBADF);
	ulp_file_release(f);
	free(want);
	free(want2);
	ulp_store_close(st);
}

/* ------------------------------------------------------------ namespace */

static int count_entry(void *opaque, const char *name, const ulp_attr *a,
                       uint64_t next)
{
	(void)name;
	(void)a;
	(void)next;
	(*(int *)opaque)++;
	return 0;
}

typedef struct page {
	char names[64][16];
	uint64_t next[64];
	int n, max;
} page;

static int page_entry(void *opaque, const char *name, const ulp_attr *a,
                      uint64_t next)
{
	page *p = opaque;

	(void)a;
	if (p->n == p->max)
		return 1;
	snprintf(p->names[p->n], 16, "%s", name);
	p->next[p->n++] = next;
	return 0;
}

Test(store, namespace_basics)
{
	ulp_store *st = open_default();
	ulp_attr a, r0, r1;
	char longname[300];

	memset(longname, 'n', 256);
	longname[256] = '\0';
	cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, longname, 0644, 0, 0, &a),
	             -ENAMETOOLONG);
	longname[255] = '\0';
	cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, longname, 0644, 0, 0, &a),
	             0);
	cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, longname, 0644, 0, 0, &a),
	             -EEXIST);
	cr_assert_eq(ulp_ns_lookup(st, ULP_ROOT_INO, "nope", &a), -ENOENT);

	cr_assert_eq(ulp_ns_getattr(st, ULP_ROOT_INO, &r0), 0);
	cr_assert_eq(r0.nlink, 2);
	uint64_t d = mkdir_in(st, ULP_ROOT_INO, "d");
	mkdir_in(st, d, "sub");
	cr_assert_eq(ulp_ns_getattr(st, ULP_ROOT_INO, &r1), 0);
	cr_assert_eq(r1.nlink, 3, "root nlink %u", r1.nlink);
	cr_assert_eq(ulp_ns_getattr(st, d, &a), 0);
	cr_assert_eq(a.nlink, 3);
	cr_assert(S_ISDIR(a.mode));
	cr_assert_eq(ulp_ns_rmdir(st, ULP_ROOT_INO, "d"), -ENOTEMPTY);
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "d"), -EISDIR);
	cr_assert_eq(ulp_ns_rmdir(st, ULP_ROOT_INO, longname), -ENOTDIR);

	/* Directory times follow entry changes. */
	struct timespec before = r1.mtime;
	usleep(2000);
	put_file(st, d, "x", "1", 1);
	cr_assert_eq(ulp_ns_getattr(st, d, &a), 0);
	cr_assert(a.mtime.tv_sec > before.tv_sec ||
	          (a.mtime.tv_sec == before.tv_sec &&
	           a.mtime.tv_nsec > before.tv_nsec));
	struct timespec t1 = a.mtime;
	usleep(2000);
	cr_assert_eq(ulp_ns_unlink(st, d, "x"), 0);
	cr_assert_eq(ulp_ns_getattr(st, d, &a), 0);
	cr_assert(a.mtime.tv_sec > t1.tv_sec || (a.mtime.tv_sec == t1.tv_sec &&
	                                         a.mtime.tv_nsec > t1.tv_nsec));

	/* Symlinks. */
	char buf[64];
	cr_assert_eq(ulp_ns_symlink(st, d, "ln", "../target", 0, 0, &a), 0);
	cr_assert(S_ISLNK(a.mode));
	cr_assert_eq(a.size, 9);
	cr_assert_eq(ulp_ns_readlink(st, a.ino, buf, sizeof buf), 0);
	cr_assert_str_eq(buf, "../target");
	cr_assert_eq(ulp_ns_readlink(st, d, buf, sizeof buf), -EINVAL);
	ulp_file *fh;
	cr_assert_eq(ulp_file_open(st, d, O_RDONLY, &fh, NULL), -EISDIR);

	/* setattr. */
	ulp_attr set = { 0 };
	set.mode = 0700;
	set.uid = 12;
	set.mtime.tv_sec = 1000;
	cr_assert_eq(ulp_ns_setattr(st, d, &set,
	                            ULP_SET_MODE | ULP_SET_UID | ULP_SET_MTIME,
	                            &a),
	             0);
	cr_assert_eq(a.mode, S_IFDIR | 0700);
	cr_assert_eq(a.uid, 12);
	cr_assert_eq(a.mtime.tv_sec, 1000);

	/* readdir with offsets: resume where a full buffer stopped. */
	for (int i = 0; i < 20; i++) {
		char n[16];
		snprintf(n, sizeof n, "e%02d", i);
		cr_assert_eq(ulp_ns_mkdir(st, d, n, 0755, 0, 0, &a), 0);
	}
	int total = 0;
	cr_assert_eq(ulp_ns_readdir(st, d, 0, count_entry, &total), 0);
	cr_assert_eq(total, 2 + 1 + 1 + 20); /* . .. sub ln e00..e19 */
	page p = { .max = 5 };
	cr_assert_eq(ulp_ns_readdir(st, d, 0, page_entry, &p), 0);
	cr_assert_eq(p.n, 5);
	cr_assert_str_eq(p.names[0], ".");
	cr_assert_str_eq(p.names[1], "..");
	int seen = p.n;
	uint64_t off = p.next[p.n - 1];
	for (;;) {
		page q = { .max = 5 };
		cr_assert_eq(ulp_ns_readdir(st, d, off, page_entry, &q), 0);
		if (q.n == 0)
			break;
		seen += q.n;
		off = q.next[q.n - 1];
	}
	cr_assert_eq(seen, total);
	uint64_t file = lookup(st, ULP_ROOT_INO, longname);
	cr_assert_eq(ulp_ns_readdir(st, file, 0, count_entry, &total),
	             -ENOTDIR);
	ulp_store_close(st);
}

Test(store, rename_patterns)
{
	ulp_store *st = open_default();
	sfile v1 = st_make(64 * 1024, 512, 21);
	sfile v2 = st_copy(&v1);
	ulp_attr a;

	st_step(&v2, 22);
	uint64_t x = put_file(st, ULP_ROOT_INO, "x", v1.p, v1.len);
	sync_ok(st);
	ulp_version_info xv = current(st, x);

	/* Save to x.tmp, rename over x (inside the settle delay): the new
	 * version of path x is coded against x's previous one. */
	uint64_t t = put_file(st, ULP_ROOT_INO, "x.tmp", v2.p, v2.len);
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "x.tmp", ULP_ROOT_INO, "x",
	                           0),
	             0);
	cr_assert_eq(lookup(st, ULP_ROOT_INO, "x"), t);
	cr_assert_eq(ulp_ns_lookup(st, ULP_ROOT_INO, "x.tmp", &a), -ENOENT);
	cr_assert_eq(ulp_ns_getattr(st, x, &a), -ENOENT);
	settle_all(st);
	ulp_version_info tv = current(st, t);
	cr_assert_eq(ulp_version_get(st, xv.id, &xv), 0);
	cr_assert_eq(xv.ref, tv.id);
	cr_assert_eq(tv.seq, 2);
	expect_content(st, t, v2.p, v2.len);
	expect_version(st, xv.id, v1.p, v1.len); /* history of x */

	/* NOREPLACE. */
	put_file(st, ULP_ROOT_INO, "y", "yy", 2);
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "y", ULP_ROOT_INO, "x",
	                           ULP_RENAME_NOREPLACE),
	             -EEXIST);
	/* Directories: rename whole, into own subtree, over files and over
	 * (non-)empty directories. */
	uint64_t d = mkdir_in(st, ULP_ROOT_INO, "d");
	uint64_t sub = mkdir_in(st, d, "sub");
	uint64_t in = put_file(st, sub, "f", v1.p, v1.len);
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "d", sub, "d2", 0),
	             -EINVAL);
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "d", d, "d2", 0), -EINVAL);
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "d", ULP_ROOT_INO, "y", 0),
	             -ENOTDIR);
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "y", ULP_ROOT_INO, "d", 0),
	             -EISDIR);
	uint64_t e = mkdir_in(st, ULP_ROOT_INO, "e");
	mkdir_in(st, e, "full");
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "d", ULP_ROOT_INO, "e", 0),
	             -ENOTEMPTY);
	cr_assert_eq(ulp_ns_rmdir(st, e, "full"), 0);
	cr_assert_eq(ulp_ns_getattr(st, ULP_ROOT_INO, &a), 0);
	uint32_t root_links = a.nlink;
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "d", ULP_ROOT_INO, "e", 0),
	             0);
	cr_assert_eq(ulp_ns_getattr(st, ULP_ROOT_INO, &a), 0);
	cr_assert_eq(a.nlink, root_links - 1);
	cr_assert_eq(lookup(st, ULP_ROOT_INO, "e"), d);
	sync_ok(st);
	expect_content(st, in, v1.p, v1.len);
	char path[64];
	cr_assert_eq(ulp_ns_path(st, in, path, sizeof path), 0);
	cr_assert_str_eq(path, "e/sub/f");
	/* Move a directory to another parent. */
	uint64_t z = mkdir_in(st, ULP_ROOT_INO, "z");
	cr_assert_eq(ulp_ns_rename(st, d, "sub", z, "moved", 0), 0);
	cr_assert_eq(ulp_ns_getattr(st, z, &a), 0);
	cr_assert_eq(a.nlink, 3);
	cr_assert_eq(ulp_ns_getattr(st, d, &a), 0);
	cr_assert_eq(a.nlink, 2);
	expect_content(st, lookup(st, lookup(st, z, "moved"), "f"), v1.p,
	               v1.len);
	/* Exchange. */
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "x", ULP_ROOT_INO, "y",
	                           ULP_RENAME_EXCHANGE),
	             0);
	cr_assert_eq(lookup(st, ULP_ROOT_INO, "y"), t);
	expect_content(st, lookup(st, ULP_ROOT_INO, "x"), "yy", 2);
	/* Same file: nothing happens. */
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "y", ULP_ROOT_INO, "y", 0),
	             0);
	cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, "none", ULP_ROOT_INO, "q",
	                           0),
	             -ENOENT);
	ulp_store_close(st);
	free(v1.p);
	free(v2.p);
}

Test(store, unlink_while_open)
{
	ulp_store *st = open_default();
	uint8_t data[50000];
	ulp_file *r, *w;
	ulp_attr a;

	fill_random(data, sizeof data, 5);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "u", data, sizeof data);
	sync_ok(st);
	cr_assert_eq(ulp_file_open(st, ino, O_RDONLY, &r, NULL), 0);
	cr_assert_eq(ulp_file_open(st, ino, O_RDWR, &w, NULL), 0);
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "u"), 0);
	cr_assert_eq(ulp_ns_lookup(st, ULP_ROOT_INO, "u", &a), -ENOENT);
	cr_assert_eq(ulp_ns_getattr(st, ino, &a), 0);
	cr_assert_eq(a.nlink, 0);
	write_all(w, "new", 3, 10);
	memcpy(data + 10, "new", 3);
	uint8_t buf[sizeof data];
	cr_assert_eq(ulp_file_read(r, buf, sizeof buf, 0), (ssize_t)sizeof buf);
	cr_assert(memcmp(buf, data, sizeof data) == 0);
	ulp_file_release(w);
	sync_ok(st);
	cr_assert_eq(ulp_file_read(r, buf, sizeof buf, 0), (ssize_t)sizeof buf);
	cr_assert(memcmp(buf, data, sizeof data) == 0);
	ulp_file_release(r);
	cr_assert_eq(ulp_ns_getattr(st, ino, &a), -ENOENT);
	char name[32];
	snprintf(name, sizeof name, "%llu", (unsigned long long)ino);
	cr_assert(!exists_in("staging", name));
	cr_assert_eq(ulp_store_gc(st), 0);
	size_t n;
	object_bytes(&n);
	cr_assert_eq(n, 0, "%zu objects left", n);
	ulp_store_close(st);
}

/* ------------------------------------------------------------ ghosts */

static int count_state(void *opaque, const ulp_version_info *v,
                       const char *path)
{
	uint64_t *c = opaque;

	(void)path;
	c[v->state]++;
	return 0;
}

Test(store, deleting_a_lineage_rebases_nothing)
{
	ulp_store *st = open_default();
	sfile v = st_make(64 * 1024, 256, 31);
	uint64_t d = mkdir_in(st, ULP_ROOT_INO, "a");
	ulp_version_info pv[3];

	/* a/p: three versions in a chain; then q elsewhere, same layout:
	 * p1 -> p2 -> p3 -> q, q standalone. */
	uint64_t p = 0;
	for (int i = 0; i < 3; i++) {
		p = put_file(st, d, "p", v.p, v.len);
		sync_ok(st);
		pv[i] = current(st, p);
		st_step(&v, 40 + (uint64_t)i);
	}
	uint64_t q = put_file(st, ULP_ROOT_INO, "q", v.p, v.len);
	settle_all(st);
	ulp_version_info qv = current(st, q);
	cr_assert_eq(qv.ref, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ulp_version_get(st, pv[i].id, &pv[i]), 0);
	cr_assert_eq(pv[0].ref, pv[1].id);
	cr_assert_eq(pv[1].ref, pv[2].id);
	cr_assert_eq(pv[2].ref, qv.id, "no predecessor by layout");

	/* rm -rf a: p's versions are older than q, nothing depends on
	 * them: they go at once, with no rebase. */
	cr_assert_eq(ulp_ns_unlink(st, d, "p"), 0);
	cr_assert_eq(ulp_ns_rmdir(st, ULP_ROOT_INO, "a"), 0);
	ulp_version_info g;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(ulp_version_get(st, pv[i].id, &g), 0);
		cr_assert_eq(g.state, ULP_VERSION_DELETED, "v%d state %d", i,
		             g.state);
	}
	cr_assert_eq(ulp_store_gc(st), 0);
	qv = current(st, q);
	cr_assert(qv.keyframe);
	cr_assert_eq(qv.depth, 0);
	expect_content(st, q, v.p, v.len);
	uint64_t c[3] = { 0 };
	cr_assert_eq(ulp_version_list(st, NULL, count_state, c), 0);
	cr_assert_eq(c[0], 1);
	cr_assert_eq(c[1], 0);
	cr_assert_eq(c[2], 3);
	size_t n;
	uint64_t bytes = object_bytes(&n);
	cr_assert_eq(n, 1);
	cr_assert_eq(bytes, qv.stored);
	ulp_store_stats s;
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_eq(s.stored_bytes, qv.stored);
	cr_assert_eq(s.rebases, 0);
	cr_assert_eq(s.flips, 3);
	check_integrity(st);
	ulp_store_close(st);
	free(v.p);
}

/* Two files of one layout in a checkpoint directory (two ranks' shards):
 * each file of the next checkpoint is coded with its own predecessor, the
 * file of the same name, not the latest of the layout. */
Test(store, predecessor_by_name_and_layout)
{
	ulp_store *st = open_default();
	sfile r0 = st_make(64 * 1024, 256, 51),
	      r1 = st_make(64 * 1024, 256, 52);
	uint64_t c1 = mkdir_in(st, ULP_ROOT_INO, "c1");
	uint64_t c2 = mkdir_in(st, ULP_ROOT_INO, "c2");

	uint64_t a0 = put_file(st, c1, "__0_0.distcp", r0.p, r0.len);
	sync_ok(st);
	uint64_t a1 = put_file(st, c1, "__1_0.distcp", r1.p, r1.len);
	sync_ok(st);
	ulp_version_info v0 = current(st, a0), v1 = current(st, a1);
	cr_assert_neq(v0.layout, 0);
	cr_assert_eq(v0.layout, v1.layout);
	st_step(&r0, 53);
	st_step(&r1, 54);
	uint64_t b0 = put_file(st, c2, "__0_0.distcp", r0.p, r0.len);
	sync_ok(st);
	uint64_t b1 = put_file(st, c2, "__1_0.distcp", r1.p, r1.len);
	settle_all(st);
	/* Each predecessor is coded against its successor (the flips). */
	cr_assert_eq(ulp_version_get(st, v0.id, &v0), 0);
	cr_assert_eq(ulp_version_get(st, v1.id, &v1), 0);
	cr_assert_eq(v0.ref, current(st, b0).id, "c1/__0_0 ref %" PRIu64,
	             v0.ref);
	cr_assert_eq(v1.ref, current(st, b1).id, "c1/__1_0 ref %" PRIu64,
	             v1.ref);
	expect_content(st, b0, r0.p, r0.len);
	expect_content(st, b1, r1.p, r1.len);
	check_integrity(st);
	ulp_store_close(st);
	free(r0.p);
	free(r1.p);
}

Test(store, ghosts_are_rebased)
{
	/* a1 -> b1 -> c1 (three files, one layout; c1 standalone).
	 * Deleting b makes b1 a ghost a1 depends on: a1 is rebased onto
	 * c1, b1's reference, which is live.  Deleting c then rebases a1
	 * (standalone now), and nothing else. */
	ulp_store *st = open_default();
	sfile v = st_make(64 * 512, 128, 51);
	sfile va = st_copy(&v);

	uint64_t a = put_file(st, ULP_ROOT_INO, "a", v.p, v.len);
	sync_ok(st);
	ulp_version_info a1 = current(st, a);
	st_step(&v, 52);
	uint64_t b = put_file(st, ULP_ROOT_INO, "b", v.p, v.len);
	sync_ok(st);
	ulp_version_info b1 = current(st, b);
	st_step(&v, 53);
	uint64_t c = put_file(st, ULP_ROOT_INO, "c", v.p, v.len);
	settle_all(st);
	ulp_version_info c1 = current(st, c);
	cr_assert_eq(ulp_version_get(st, a1.id, &a1), 0);
	cr_assert_eq(ulp_version_get(st, b1.id, &b1), 0);
	cr_assert_eq(a1.ref, b1.id);
	cr_assert_eq(b1.ref, c1.id);
	cr_assert_eq(a1.depth, 2);
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "b"), 0);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, a1.id, &a1), 0);
	cr_assert_eq(a1.ref, c1.id);
	cr_assert_eq(a1.depth, 1);
	expect_content(st, a, va.p, va.len);
	ulp_store_stats s;
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_eq(s.rebases, 1);
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "c"), 0);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, a1.id, &a1), 0);
	cr_assert_eq(a1.ref, 0);
	cr_assert(a1.keyframe);
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_eq(s.rebases, 2);
	expect_content(st, a, va.p, va.len);
	check_integrity(st);
	ulp_store_close(st);
	free(v.p);
	free(va.p);
}

Test(store, rotation_keeps_store_bounded)
{
	ulp_store *st = open_default();
	sfile m = st_make(64 * 2048, 1024, 61);
	uint64_t dirs[10];
	sfile kept[10];
	uint64_t max_bytes = 0, keyframe = 0;

	for (int n = 0; n < 10; n++) {
		char name[32], tmp[40], json[64];
		snprintf(name, sizeof name, "checkpoint-%d", n);
		snprintf(tmp, sizeof tmp, "tmp-checkpoint-%d", n);
		/* Newer Trainers save into tmp-checkpoint-N and rename it:
		 * sometimes before, sometimes after the files are encoded. */
		dirs[n] = mkdir_in(st, ULP_ROOT_INO, n % 3 ? tmp : name);
		put_file(st, dirs[n], "model.safetensors", m.p, m.len);
		int jl = snprintf(json, sizeof json, "{\"global_step\": %d}\n",
		                  n * 100);
		put_file(st, dirs[n], "trainer_state.json", json, (size_t)jl);
		kept[n] = st_copy(&m);
		if (n % 3 == 2)
			sync_ok(st);
		if (n % 3)
			cr_assert_eq(ulp_ns_rename(st, ULP_ROOT_INO, tmp,
			                           ULP_ROOT_INO, name, 0),
			             0);
		settle_all(st);
		if (n > 0) {
			/* The previous checkpoint is coded against this one. */
			ulp_version_info mv =
				current(st, lookup(st, dirs[n - 1],
			                           "model.safetensors"));
			cr_assert_neq(mv.ref, 0, "checkpoint %d not a delta",
			              n - 1);
		}
		if (n == 0)
			keyframe = current(st, lookup(st, dirs[0],
			                              "model.safetensors"))
			                   .stored;
		if (n >= 2) {
			/* save_total_limit=2: rm -rf the oldest. */
			snprintf(name, sizeof name, "checkpoint-%d", n - 2);
			cr_assert_eq(ulp_ns_unlink(st, dirs[n - 2],
			                           "model.safetensors"),
			             0);
			cr_assert_eq(ulp_ns_unlink(st, dirs[n - 2],
			                           "trainer_state.json"),
			             0);
			cr_assert_eq(ulp_ns_rmdir(st, ULP_ROOT_INO, name), 0);
			free(kept[n - 2].p);
			kept[n - 2].p = NULL;
		}
		cr_assert_eq(ulp_store_gc(st), 0);
		size_t cnt;
		uint64_t b = object_bytes(&cnt);
		if (b > max_bytes)
			max_bytes = b;
		st_step(&m, 100 + (uint64_t)n);
	}
	/* Kept: checkpoints 8 and 9 = one keyframe + one delta (+ json). */
	size_t cnt;
	uint64_t now = object_bytes(&cnt);
	cr_assert_eq(cnt, 4, "%zu objects", cnt);
	cr_assert_lt(now, keyframe * 3 / 2, "store %llu vs keyframe %llu",
	             (unsigned long long)now, (unsigned long long)keyframe);
	cr_assert_lt(max_bytes, keyframe * 3, "peak %llu",
	             (unsigned long long)max_bytes);
	for (int n = 8; n < 10; n++) {
		expect_content(st, lookup(st, dirs[n], "model.safetensors"),
		               kept[n].p, kept[n].len);
		free(kept[n].p);
	}
	ulp_store_stats s;
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_eq(s.versions[ULP_VERSION_GHOST], 0);
	cr_assert_eq(s.versions[ULP_VERSION_LIVE], 4);
	check_integrity(st);
	ulp_store_close(st);
	free(m.p);
}

Test(store, keyframe_interval)
{
	ulp_store *st = open_k(4);
	sfile v = st_make(64 * 256, 64, 71);
	uint64_t ino = 0;

	/* Reverse chains: each newest version standalone, the previous
	 * one flipped against it unless some version would then decode
	 * more than 3 links: v4 and v8 stay standalone for good. */
	static const uint32_t depth[10] = { 3, 2, 1, 0, 3, 2, 1, 0, 1, 0 };
	for (int i = 0; i < 10; i++) {
		ino = put_file(st, ULP_ROOT_INO, "latest.pt", v.p, v.len);
		settle_all(st);
		ulp_version_info cur = current(st, ino);
		cr_assert_eq(cur.depth, 0, "newest at depth %u", cur.depth);
		cr_assert(cur.keyframe);
		st_step(&v, 200 + (uint64_t)i);
	}
	for (int i = 0; i < 10; i++) {
		ulp_version_info w;
		cr_assert_eq(ulp_version_find(st, "latest.pt", (uint64_t)i + 1,
		                              &w),
		             0);
		cr_assert_eq(w.depth, depth[i], "version %d depth %u", i + 1,
		             w.depth);
		cr_assert_eq(w.keyframe, depth[i] == 0);
	}
	ulp_store_close(st);
	free(v.p);
}

/* ------------------------------------------------------------ lifetime */

Test(store, reopen_keeps_everything)
{
	ulp_store *st = open_default(), *other = NULL;
	sfile v = st_make(64 * 512, 100, 81);
	uint64_t d = mkdir_in(st, ULP_ROOT_INO, "dir");
	uint64_t f = put_file(st, d, "f", v.p, v.len);
	sfile v2 = st_copy(&v);
	st_step(&v2, 82);
	sync_ok(st);
	put_file(st, d, "f", v2.p, v2.len);
	ulp_attr sl;
	cr_assert_eq(ulp_ns_symlink(st, d, "l", "f", 0, 0, &sl), 0);
	/* The lock. */
	cr_assert_eq(ulp_store_open(store_dir(), NULL, &other), -EBUSY);
	/* Close drains the queue: the second version is committed. */
	ulp_store_close(st);

	st = open_default();
	cr_assert_eq(lookup(st, ULP_ROOT_INO, "dir"), d);
	cr_assert_eq(lookup(st, d, "f"), f);
	expect_content(st, f, v2.p, v2.len);
	ulp_version_info cv = current(st, f);
	cr_assert_eq(cv.seq, 2);
	cr_assert_eq(cv.ref, 0);
	/* The flip of the first version was done at close. */
	ulp_version_info fv;
	cr_assert_eq(ulp_version_find(st, "dir/f", 1, &fv), 0);
	cr_assert_eq(fv.ref, cv.id);
	char buf[8];
	cr_assert_eq(ulp_ns_readlink(st, lookup(st, d, "l"), buf, sizeof buf),
	             0);
	cr_assert_str_eq(buf, "f");
	uint64_t g = put_file(st, d, "g", "gg", 2);
	cr_assert_gt(g, sl.ino, "inode numbers are never reused");
	ulp_store_close(st);

	/* The catalog records its schema version. */
	char db[400];
	sqlite3 *h;
	sqlite3_stmt *s;
	snprintf(db, sizeof db, "%s/catalog.db", store_dir());
	cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(h,
	                                "SELECT value FROM meta WHERE key ="
	                                " 'schema_version'",
	                                -1, &s, NULL),
	             SQLITE_OK);
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
	cr_assert_eq(sqlite3_column_int(s, 0), 10);
	sqlite3_finalize(s);
	sqlite3_close(h);
	free(v.p);
	free(v2.p);
}

Test(store, refuses_foreign_directory)
{
	char p[400];
	ulp_store *st = NULL;

	mkdir(store_dir(), 0755);
	snprintf(p, sizeof p, "%s/precious.txt", store_dir());
	FILE *f = fopen(p, "w");
	cr_assert(f);
	fclose(f);
	cr_assert_eq(ulp_store_open(store_dir(), NULL, &st), -ENOTEMPTY);
	cr_assert_eq(access(p, F_OK), 0);
}

static void touch_in(const char *sub, const char *name)
{
	char p[400];

	snprintf(p, sizeof p, "%s/%s/%s", store_dir(), sub, name);
	FILE *f = fopen(p, "w");
	cr_assert(f, "%s: %s", p, strerror(errno));
	fputs("junk", f);
	fclose(f);
}

Test(store, crash_recovery)
{
	uint8_t a[200000], b[70000];
	pid_t pid;
	int status;

	fill_random(a, sizeof a, 91);
	fill_random(b, sizeof b, 92);
	/* A daemon that dies before encoding anything: one file closed,
	 * one still open. */
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		ulp_store_opts o = { 0 };
		ulp_store *st;
		ulp_file *f;
		ulp_attr at;
		o.settle_ms = 600000;
		o.encoder_threads = 1;
		if (ulp_store_open(store_dir(), &o, &st))
			_exit(2);
		if (ulp_ns_create(st, ULP_ROOT_INO, "closed", 0644, 0, 0,
		                  &at) ||
		    ulp_file_open(st, at.ino, O_WRONLY, &f, NULL) ||
		    ulp_file_write(f, a, sizeof a, 0) != (ssize_t)sizeof a)
			_exit(3);
		ulp_file_release(f);
		if (ulp_ns_create(st, ULP_ROOT_INO, "open", 0644, 0, 0, &at) ||
		    ulp_file_open(st, at.ino, O_WRONLY, &f, NULL) ||
		    ulp_file_write(f, b, sizeof b, 0) != (ssize_t)sizeof b)
			_exit(4);
		_exit(0); /* no close: as if killed */
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d",
	          WEXITSTATUS(status));

	/* Debris of other crashes. */
	touch_in("objects", "0123456789abcdef0123456789abcdef"); /* orphan */
	touch_in("objects", ".tmp-1234");
	touch_in("staging", "987654");
	touch_in("staging", ".rebase-3");

	ulp_store *st = open_default();
	cr_assert(!exists_in("objects", "0123456789abcdef0123456789abcdef"));
	cr_assert(!exists_in("objects", ".tmp-1234"));
	cr_assert(!exists_in("staging", "987654"));
	cr_assert(!exists_in("staging", ".rebase-3"));
	sync_ok(st);
	uint64_t c = lookup(st, ULP_ROOT_INO, "closed");
	uint64_t o = lookup(st, ULP_ROOT_INO, "open");
	expect_content(st, c, a, sizeof a);
	expect_content(st, o, b, sizeof b);
	current(st, c);
	current(st, o);
	char name[32];
	snprintf(name, sizeof name, "%llu", (unsigned long long)c);
	cr_assert(!exists_in("staging", name));
	ulp_store_close(st);
}

/* kill -9 at random moments while files are written and committed:
 * every file that was closed is there afterwards, exact. */
Test(store, kill9_loses_no_closed_file)
{
	uint8_t *buf = malloc(400000);
	uint64_t seed = 12345;

	cr_assert(buf);
	for (int round = 0; round < 4; round++) {
		int pfd[2];
		cr_assert_eq(pipe(pfd), 0);
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			ulp_store_opts o = { 0 };
			ulp_store *st;
			close(pfd[0]);
			o.settle_ms = 1;
			o.encoder_threads = 2;
			if (ulp_store_open(store_dir(), &o, &st))
				_exit(2);
			for (int i = 0;; i++) {
				char name[32];
				ulp_attr at;
				ulp_file *f;
				size_t len = 1000 + (size_t)(i * 7919) % 300000;
				snprintf(name, sizeof name, "r%d-f%d", round,
				         i);
				fill_random(buf, len,
				            (uint64_t)round * 1000 +
				                    (uint64_t)i);
				if (ulp_ns_create(st, ULP_ROOT_INO, name, 0644,
				                  0, 0, &at) ||
				    ulp_file_open(st, at.ino, O_WRONLY, &f,
				                  NULL) ||
				    ulp_file_write(f, buf, len, 0) !=
				            (ssize_t)len)
					_exit(3);
				ulp_file_release(f);
				/* Rewrites and renames as well. */
				if (i % 3 == 2) {
					char prev[32];
					snprintf(prev, sizeof prev, "r%d-f%d",
					         round, i - 1);
					if (ulp_ns_unlink(st, ULP_ROOT_INO,
					                  prev))
						_exit(5);
				}
				if (write(pfd[1], &i, sizeof i) != sizeof i)
					_exit(6);
			}
		}
		close(pfd[1]);
		usleep(50000 + (useconds_t)(rng_next(&seed) % 250000));
		kill(pid, SIGKILL);
		int status;
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status), "child exited %d",
		          WEXITSTATUS(status));
		int i, last = -1;
		while (read(pfd[0], &i, sizeof i) == sizeof i)
			last = i;
		close(pfd[0]);

		ulp_store *st = open_default();
		sync_ok(st);
		for (i = 0; i <= last; i++) {
			char name[32];
			ulp_attr at;
			size_t len = 1000 + (size_t)(i * 7919) % 300000;
			snprintf(name, sizeof name, "r%d-f%d", round, i);
			int rc = ulp_ns_lookup(st, ULP_ROOT_INO, name, &at);
			if (i % 3 == 1 && i + 1 <= last) {
				cr_assert_eq(rc, -ENOENT, "%s survived unlink",
				             name);
				continue;
			}
			/* Killed between the unlink of the last one and
			 * its report: either way is right. */
			if (i % 3 == 1 && i == last && rc == -ENOENT)
				continue;
			cr_assert_eq(rc, 0, "%s lost (last %d)", name, last);
			fill_random(buf, len,
			            (uint64_t)round * 1000 + (uint64_t)i);
			expect_content(st, at.ino, buf, len);
			current(st, at.ino);
		}
		cr_assert_eq(ulp_store_gc(st), 0);
		check_integrity(st);
		ulp_store_close(st);
	}
	free(buf);
}

/* ------------------------------------------------------------ concurrency */

typedef struct wjob {
	ulp_store *st;
	int id;
} wjob;

static void *writer_thread(void *arg)
{
	wjob *j = arg;
	sfile v = st_make(64 * 256, 128, 1000 + (uint64_t)j->id);

	for (int k = 0; k < 4; k++) {
		char name[32];
		ulp_attr a;
		ulp_file *f;
		snprintf(name, sizeof name, "w%d-%d", j->id, k);
		if (ulp_ns_create(j->st, ULP_ROOT_INO, name, 0644, 0, 0, &a) ||
		    ulp_file_open(j->st, a.ino, O_RDWR, &f, NULL))
			return (void *)1;
		for (size_t off = 0; off < v.len; off += 10000) {
			size_t n = v.len - off < 10000 ? v.len - off : 10000;
			if (ulp_file_write(f, v.p + off, n, (off_t)off) !=
			    (ssize_t)n)
				return (void *)2;
		}
		ulp_file_release(f);
		st_step(&v, (uint64_t)k);
	}
	free(v.p);
	return NULL;
}

Test(store, concurrent_writers)
{
	ulp_store_opts o = { 0 };
	pthread_t th[6];
	wjob jobs[6];

	o.settle_ms = 1;
	o.encoder_threads = 3;
	o.cache_bytes = 4u << 20;
	ulp_store *st = open_opts(&o);
	for (int i = 0; i < 6; i++) {
		jobs[i] = (wjob){ st, i };
		cr_assert_eq(pthread_create(&th[i], NULL, writer_thread,
		                            &jobs[i]),
		             0);
	}
	for (int i = 0; i < 6; i++) {
		void *r;
		pthread_join(th[i], &r);
		cr_assert_null(r, "writer %d failed", i);
	}
	sync_ok(st);
	for (int i = 0; i < 6; i++) {
		sfile v = st_make(64 * 256, 128, 1000 + (uint64_t)i);
		for (int k = 0; k < 4; k++) {
			char name[32];
			snprintf(name, sizeof name, "w%d-%d", i, k);
			uint64_t ino = lookup(st, ULP_ROOT_INO, name);
			expect_content(st, ino, v.p, v.len);
			current(st, ino);
			st_step(&v, (uint64_t)k);
		}
		free(v.p);
	}
	check_integrity(st);
	ulp_store_close(st);
}

/* A chain of nver versions of a file of several chunks, committed; the
 * contents of every version in vers[] (caller frees), the file's inode in
 * *ino.  The store is closed: reopen it for a cold cache. */
static uint64_t make_chain(int nver, sfile *vers, uint64_t *ino)
{
	ulp_store *st = open_k(16);
	sfile v = st_make(64 * 65536, 4096, 77); /* 8 MiB of bf16 */

	for (int i = 0; i < nver; i++) {
		*ino = put_file(st, ULP_ROOT_INO, "m.safetensors", v.p, v.len);
		sync_ok(st);
		vers[i] = st_copy(&v);
		st_step(&v, 500 + (uint64_t)i);
	}
	ulp_store_close(st); /* flips done */
	st = open_k(16);
	ulp_version_info oldest;
	cr_assert_eq(ulp_version_find(st, "m.safetensors", 1, &oldest), 0);
	cr_assert_eq(oldest.depth, (uint32_t)nver - 1);
	ulp_store_close(st);
	free(v.p);
	return oldest.id;
}

static uint64_t decodes_of(ulp_store *st)
{
	ulp_store_stats s;

	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	return s.cache_decodes;
}

typedef struct rjob {
	ulp_store *st;
	uint64_t vid;
	const sfile *want;
	pthread_barrier_t *go;
	int ok;
} rjob;

static void *reader_thread(void *arg)
{
	rjob *j = arg;
	uint8_t *buf = malloc(j->want->len);

	if (!buf)
		return NULL;
	pthread_barrier_wait(j->go);
	ssize_t n = ulp_version_read(j->st, j->vid, buf, j->want->len, 0);
	j->ok = n == (ssize_t)j->want->len &&
	        memcmp(buf, j->want->p, j->want->len) == 0;
	free(buf);
	return NULL;
}

/* Readers that want the same chunks at once wait for one decode of each
 * (every chunk of every version of the chain decoded exactly once, as
 * for a lone reader), and all get the right bytes. */
Test(store, concurrent_readers_decode_each_chunk_once)
{
	enum { NV = 3, NT = 8 };
	sfile vers[NV];
	uint64_t ino;
	pthread_t th[NT];
	rjob jobs[NT];
	pthread_barrier_t go;

	/* A lone reader of the oldest version (the deepest): its decodes. */
	uint64_t oldest = make_chain(NV, vers, &ino);
	ulp_store *st = open_k(16);
	expect_version(st, oldest, vers[0].p, vers[0].len);
	uint64_t lone = decodes_of(st);
	ulp_store_close(st);
	cr_assert_gt(lone, (uint64_t)NV * 3,
	             "a chain of %d versions of "
	             "several chunks each: %llu decodes",
	             NV, (unsigned long long)lone);

	st = open_k(16);
	pthread_barrier_init(&go, NULL, NT);
	for (int i = 0; i < NT; i++) {
		jobs[i] = (rjob){ st, oldest, &vers[0], &go, 0 };
		cr_assert_eq(pthread_create(&th[i], NULL, reader_thread,
		                            &jobs[i]),
		             0);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		cr_assert(jobs[i].ok, "reader %d got wrong bytes", i);
	}
	pthread_barrier_destroy(&go);
	cr_assert_eq(decodes_of(st), lone,
	             "%llu decodes by %d readers, %llu "
	             "by one",
	             (unsigned long long)decodes_of(st), NT,
	             (unsigned long long)lone);
	/* Decoding the oldest version left the newer ones cached. */
	for (int i = 1; i < NV; i++) {
		ulp_version_info v;
		cr_assert_eq(ulp_version_find(st, "m.safetensors",
		                              (uint64_t)i + 1, &v),
		             0);
		expect_version(st, v.id, vers[i].p, vers[i].len);
	}
	cr_assert_eq(decodes_of(st), lone);
	ulp_store_close(st);
	for (int i = 0; i < NV; i++)
		free(vers[i].p);
}

/* Sequential reads through a handle are decoded ahead, each chunk once
 * (the reader waits for read-ahead's decode instead of redoing it), and
 * closing the store with read-ahead queued neither hangs nor leaks. */
Test(store, sequential_reads_read_ahead)
{
	enum { NV = 4 };
	sfile vers[NV];
	const sfile *w = &vers[0];
	uint64_t ino;
	ulp_store_stats s;

	uint64_t oldest = make_chain(NV, vers, &ino);
	ulp_store *st = open_k(16);
	expect_version(st, oldest, w->p, w->len);
	uint64_t lone = decodes_of(st);
	ulp_store_close(st);

	st = open_k(16);
	ulp_readahead *hra = ulp_readahead_new(st);
	cr_assert(hra);
	uint8_t *got = malloc(w->len);
	cr_assert(got);
	for (size_t off = 0; off < w->len; off += 131072) {
		size_t n = w->len - off < 131072 ? w->len - off : 131072;
		cr_assert_eq(ulp_version_read_ra(st, hra, oldest, got + off, n,
		                                 off),
		             (ssize_t)n);
	}
	cr_assert(memcmp(got, w->p, w->len) == 0, "content differs");
	ulp_readahead_free(hra);
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_gt(s.readahead, 0, "nothing was read ahead");
	cr_assert_eq(s.cache_decodes, lone,
	             "%llu decodes with read-ahead, "
	             "%llu without",
	             (unsigned long long)s.cache_decodes,
	             (unsigned long long)lone);
	ulp_store_close(st);

	/* Read-ahead under way at close, through a version reader. */
	st = open_k(16);
	ulp_readahead *ra = ulp_readahead_new(st);
	cr_assert(ra);
	cr_assert_eq(ulp_version_read_ra(st, ra, oldest, got, 131072, 0),
	             131072);
	cr_assert(memcmp(got, w->p, 131072) == 0);
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_gt(s.readahead, 0);
	ulp_readahead_free(ra);
	ulp_store_close(st);
	free(got);
	for (int i = 0; i < NV; i++)
		free(vers[i].p);
}

/* The sink of in-place reads: the pieces appended to got. */
typedef struct iov_sink {
	uint8_t *got;
	size_t len;
	int calls, pieces;
} iov_sink;

static int iov_append(void *opaque, const struct iovec *iov, int count)
{
	iov_sink *k = opaque;
	k->calls++;
	k->pieces += count;
	for (int j = 0; j < count; j++) {
		memcpy(k->got + k->len, iov[j].iov_base, iov[j].iov_len);
		k->len += iov[j].iov_len;
	}
	return 0;
}

static int iov_refuse(void *opaque, const struct iovec *iov, int count)
{
	(void)iov;
	(void)count;
	++*(int *)opaque;
	return -EPIPE;
}

/* In-place reads (the mount's) hand over the same bytes as copying ones,
 * a range across chunks as one piece per chunk, an empty range at the
 * end as no piece, and a sink's error as the read's. */
Test(store, reads_in_place)
{
	enum { NV = 2, MB = 1u << 20 };
	sfile vers[NV];
	uint64_t ino;
	uint64_t oldest = make_chain(NV, vers, &ino);
	const sfile *w = &vers[0], *n = &vers[1];
	ulp_store *st = open_k(16);
	uint8_t *scratch = malloc(3 * MB);
	iov_sink k = { malloc(w->len), 0, 0, 0 };
	cr_assert(scratch && k.got);

	/* 3 MiB from 1 MiB + 5: the rest of chunk 0, chunk 1, a part of 2 */
	cr_assert_eq(ulp_version_read_iov(st, NULL, oldest, 3 * MB, MB + 5,
	                                  scratch, iov_append, &k),
	             (ssize_t)(3 * MB));
	cr_assert_eq(k.calls, 1);
	cr_assert_eq(k.pieces, 3);
	cr_assert(memcmp(k.got, w->p + MB + 5, 3 * MB) == 0);
	k = (iov_sink){ k.got, 0, 0, 0 };
	cr_assert_eq(ulp_version_read_iov(st, NULL, oldest, MB, w->len, scratch,
	                                  iov_append, &k),
	             0);
	cr_assert_eq(k.calls, 1);
	cr_assert_eq(k.pieces, 0);
	int calls = 0;
	cr_assert_eq(ulp_version_read_iov(st, NULL, oldest, MB, 0, scratch,
	                                  iov_refuse, &calls),
	             -EPIPE);
	cr_assert_eq(calls, 1, "a sink's error retried");

	/* the file itself (the newest version) through a handle */
	ulp_file *f;
	cr_assert_eq(ulp_file_open(st, ino, O_RDONLY, &f, NULL), 0);
	k = (iov_sink){ k.got, 0, 0, 0 };
	for (size_t off = 0; off < n->len; off += 77777) {
		ssize_t got = ulp_file_read_iov(f, 77777, (off_t)off, scratch,
		                                iov_append, &k);
		cr_assert_gt(got, 0);
	}
	cr_assert_eq(k.len, n->len);
	cr_assert(memcmp(k.got, n->p, n->len) == 0, "content differs");
	ulp_file_release(f);

	/* more chunks than one call hands over: copied into scratch */
	enum { BIG = 19 * MB };
	uint8_t *big = malloc(BIG), *bscratch = malloc(BIG);
	cr_assert(big && bscratch);
	for (size_t j = 0; j < BIG; j++)
		big[j] = (uint8_t)(j * 2654435761u >> 13);
	put_file(st, ULP_ROOT_INO, "big", big, BIG);
	sync_ok(st);
	ulp_version_info bv;
	cr_assert_eq(ulp_version_find(st, "big", 1, &bv), 0);
	k = (iov_sink){ realloc(k.got, BIG), 0, 0, 0 };
	cr_assert(k.got);
	cr_assert_eq(ulp_version_read_iov(st, NULL, bv.id, BIG, 0, bscratch,
	                                  iov_append, &k),
	             (ssize_t)BIG);
	cr_assert_eq(k.calls, 1);
	cr_assert_eq(k.pieces, 1);
	cr_assert(memcmp(k.got, big, BIG) == 0, "content differs");
	/* (chunks of 2 MiB: two of them cover 3 MiB, in place) */
	k = (iov_sink){ k.got, 0, 0, 0 };
	cr_assert_eq(ulp_version_read_iov(st, NULL, bv.id, 3 * MB, 0, bscratch,
	                                  iov_append, &k),
	             (ssize_t)(3 * MB));
	cr_assert_eq(k.pieces, 2);
	ulp_store_close(st);
	free(big);
	free(bscratch);
	free(k.got);
	free(scratch);
	for (int i = 0; i < NV; i++)
		free(vers[i].p);
}

/* A read's reply lets the kernel release the file at once, in another
 * thread, before the sink has returned (the mount's read ends with the
 * reply): here the sink releases it first.  The bytes handed over stay
 * valid, and the read touches nothing of the file or its inode after
 * (the data lock of a freed inode was unlocked: a later truncate hung on
 * it, and test_store_san reports the use after free). */
typedef struct release_sink {
	ulp_file *f;
	iov_sink k;
} release_sink;

static int iov_release_first(void *opaque, const struct iovec *iov, int count)
{
	release_sink *r = opaque;
	ulp_file_release(r->f);
	r->f = NULL;
	return iov_append(&r->k, iov, count);
}

Test(store, read_reply_may_release)
{
	enum { MB = 1u << 20, LEN = 5 * MB + 123 };
	ulp_store *st = open_k(16);
	uint8_t *want = malloc(LEN), *scratch = malloc(2 * MB);
	release_sink r = { NULL, { malloc(LEN), 0, 0, 0 } };
	cr_assert(want && scratch && r.k.got);
	for (size_t j = 0; j < LEN; j++)
		want[j] = (uint8_t)(j * 2654435761u >> 11);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "rel", want, LEN);
	sync_ok(st);

	/* one chunk, two, and the tail: each read by a handle of its own
	 * that goes in the sink, as many times as a busy reader would */
	const size_t offs[] = { 0, 2 * MB - 7, LEN - 1000 };
	for (int rep = 0; rep < 20; rep++) {
		for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
			size_t n = LEN - offs[i] < MB ? LEN - offs[i] : MB;
			r.k = (iov_sink){ r.k.got, 0, 0, 0 };
			cr_assert_eq(ulp_file_open(st, ino, O_RDONLY, &r.f,
			                           NULL),
			             0);
			cr_assert_eq(ulp_file_read_iov(r.f, MB, (off_t)offs[i],
			                               scratch,
			                               iov_release_first, &r),
			             (ssize_t)n);
			cr_assert_null(r.f, "the sink did not run");
			cr_assert_eq(r.k.len, n);
			cr_assert(memcmp(r.k.got, want + offs[i], n) == 0,
			          "content differs at %zu", offs[i]);
		}
	}
	/* and the inode, freed and loaded again, still locks */
	ulp_attr set = { 0 }, out;
	set.size = 1000;
	cr_assert_eq(ulp_ns_setattr(st, ino, &set, ULP_SET_SIZE, &out), 0);
	cr_assert_eq(out.size, 1000);
	ulp_store_close(st);
	free(r.k.got);
	free(scratch);
	free(want);
}

/* Reads check the decoded bytes only; the stored bytes' checksums are
 * what ulp_version_check_stored checks, from the object on disk, even
 * with every chunk of the version decoded in the cache. */
static void flip_object_byte(const ulp_version_info *v, off_t at)
{
	char p[700];
	uint8_t b;

	snprintf(p, sizeof p, "%s/objects/%s", store_dir(), v->object);
	int fd = open(p, O_RDWR);
	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(pread(fd, &b, 1, at), 1);
	b ^= 0x40;
	cr_assert_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

Test(store, check_stored_sees_damage_behind_the_cache)
{
	enum { LEN = 3 * (1u << 20) + 77 };
	ulp_store *st = open_default();
	uint8_t *want = malloc(LEN), *got = malloc(LEN);
	cr_assert(want && got);
	for (size_t j = 0; j < LEN; j++)
		want[j] = (uint8_t)((j * 2654435761u) >> 13);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "dmg", want, LEN);
	sync_ok(st);
	ulp_version_info v = current(st, ino);
	cr_assert_eq(ulp_version_read(st, v.id, got, LEN, 0), LEN);
	cr_assert(memcmp(got, want, LEN) == 0);
	size_t bad = 1000;
	cr_assert_eq(ulp_version_check_stored(st, v.id, &bad), 0);

	struct stat sb;
	char p[700];
	snprintf(p, sizeof p, "%s/objects/%s", store_dir(), v.object);
	cr_assert_eq(stat(p, &sb), 0);
	flip_object_byte(&v, sb.st_size / 2);
	cr_assert_eq(ulp_version_check_stored(st, v.id, &bad), -EBADMSG);
	cr_assert_lt(bad, 4, "bad chunk %zu of a 3 MiB version", bad);
	flip_object_byte(&v, sb.st_size / 2);
	cr_assert_eq(ulp_version_check_stored(st, v.id, &bad), 0);
	ulp_store_close(st);
	free(got);
	free(want);
}

/* The store's one pool runs the encoders, their chunk workers and
 * read-ahead: files of several chunks (big enough for more than one
 * worker when the pool has two threads) committed while a reader reads
 * ahead, at pool sizes 1 and 2, all finish and read back exact (a
 * nested wait that deadlocked would hit the timeout). */
typedef struct pool_writer {
	ulp_store *st;
	const uint8_t *data[3];
	size_t len;
	uint64_t ino[3];
	int err;
} pool_writer;

static void *pool_write_files(void *arg)
{
	pool_writer *w = arg;

	for (int i = 0; i < 3 && !w->err; i++) {
		char name[16];
		ulp_attr a;
		ulp_file *f;
		snprintf(name, sizeof name, "w%d.bin", i);
		w->err = ulp_ns_create(w->st, ULP_ROOT_INO, name, 0644, 0, 0,
		                       &a);
		if (!w->err)
			w->err =
				ulp_file_open(w->st, a.ino, O_WRONLY, &f, NULL);
		if (w->err)
			break;
		w->ino[i] = a.ino;
		for (size_t off = 0; off < w->len && !w->err; off += 131072) {
			size_t n = w->len - off < 131072 ? w->len - off
			                                 : 131072;
			if (ulp_file_write(f, w->data[i] + off, n,
			                   (off_t)off) != (ssize_t)n)
				w->err = -EIO;
		}
		if (!w->err)
			w->err = ulp_file_flush(f);
		ulp_file_release(f);
	}
	return NULL;
}

static void pool_encodes_beside_readahead(unsigned threads)
{
	enum { LEN = 9u << 20 }; /* 5 chunks, over the 2-worker threshold */
	ulp_store_opts o = { 0 };
	o.settle_ms = 1;
	o.encoder_threads = threads;
	o.cache_bytes = 64u << 20;
	uint8_t *bufs[4];
	for (int i = 0; i < 4; i++) {
		bufs[i] = malloc(LEN);
		cr_assert(bufs[i]);
		fill_random(bufs[i], LEN, 7100 + (uint64_t)i);
	}
	ulp_store *st = open_opts(&o);
	uint64_t rino = put_file(st, ULP_ROOT_INO, "read.bin", bufs[3], LEN);
	sync_ok(st);
	uint64_t vid = current(st, rino).id;
	pool_writer w = { st, { bufs[0], bufs[1], bufs[2] }, LEN, { 0 }, 0 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, pool_write_files, &w), 0);
	uint8_t *got = malloc(LEN);
	cr_assert(got);
	for (int pass = 0; pass < 2; pass++) {
		ulp_readahead *ra = ulp_readahead_new(st);
		cr_assert(ra);
		for (size_t off = 0; off < LEN; off += 131072)
			cr_assert_eq(ulp_version_read_ra(st, ra, vid, got + off,
			                                 131072, off),
			             131072);
		ulp_readahead_free(ra);
		cr_assert(memcmp(got, bufs[3], LEN) == 0, "pass %d", pass);
	}
	pthread_join(t, NULL);
	cr_assert_eq(w.err, 0, "writer: %s", strerror(-w.err));
	sync_ok(st);
	ulp_store_stats s;
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_gt(s.readahead, 0, "nothing was read ahead");
	for (int i = 0; i < 3; i++) {
		cr_assert_neq(current(st, w.ino[i]).id, 0, "w%d committed", i);
		expect_content(st, w.ino[i], bufs[i], LEN);
	}
	ulp_store_close(st);
	st = open_opts(&o);
	for (int i = 0; i < 3; i++)
		expect_version(st, current(st, w.ino[i]).id, bufs[i], LEN);
	ulp_store_close(st);
	free(got);
	for (int i = 0; i < 4; i++)
		free(bufs[i]);
}

Test(store, pool_of_1_encodes_beside_readahead, .timeout = 240)
{
	pool_encodes_beside_readahead(1);
}

Test(store, pool_of_2_encodes_beside_readahead, .timeout = 240)
{
	pool_encodes_beside_readahead(2);
}

/* Background work in the pool's low lane, as the zstd -19 baselines: a
 * backlog far longer than a commit takes, each job bounded. */
typedef struct low_backlog {
	_Atomic int stop;
	_Atomic unsigned ran;
} low_backlog;

static void low_job(void *arg)
{
	low_backlog *b = arg;

	if (!atomic_load(&b->stop))
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	atomic_fetch_add(&b->ran, 1);
}

/* With one pool thread, a commit is not queued behind the low lane: it
 * completes while nearly all of a 20 s backlog is still queued (in one
 * FIFO it would wait for the whole backlog). */
Test(store, commit_passes_queued_baselines, .timeout = 120)
{
	enum { BACKLOG = 20000, LEN = 300000 };
	ulp_store_opts o = { 0 };
	o.settle_ms = 1;
	o.encoder_threads = 1;
	o.cache_bytes = 8u << 20;
	ulp_store *st = open_opts(&o);
	ulp_pool *pool = ulp_store_pool(st);
	cr_assert_eq(ulp_pool_threads(pool), 1);
	ulp_pool_group *g = ulp_pool_group_new(pool);
	cr_assert(g);
	low_backlog b = { 0 };
	for (int i = 0; i < BACKLOG; i++)
		cr_assert_eq(ulp_pool_submit_low(g, low_job, &b), ULP_OK,
		             "submit %d", i);
	uint8_t *data = malloc(LEN);
	cr_assert(data);
	fill_random(data, LEN, 9100);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "c.bin", data, LEN);
	sync_ok(st);
	size_t left = ulp_pool_group_pending(g);
	cr_assert_neq(current(st, ino).id, 0, "committed");
	atomic_store(&b.stop, 1);
	ulp_pool_group_free(g);
	cr_assert_eq(atomic_load(&b.ran), BACKLOG);
	cr_assert_gt(left, BACKLOG / 2,
	             "the commit waited for %zu of %d low jobs", BACKLOG - left,
	             BACKLOG);
	expect_content(st, ino, data, LEN);
	ulp_store_close(st);
	free(data);
}

Test(store, rewrite_races_the_encoder)
{
	ulp_store *st = open_default();
	uint8_t a[150000], b[120000];

	fill_random(a, sizeof a, 301);
	fill_random(b, sizeof b, 302);
	for (int i = 0; i < 15; i++) {
		char name[16];
		snprintf(name, sizeof name, "r%d", i);
		uint64_t ino = put_file(st, ULP_ROOT_INO, name, a, sizeof a);
		usleep((useconds_t)(i * 300));
		put_file(st, ULP_ROOT_INO, name, b, sizeof b);
		if (i % 2)
			usleep(2000);
		ulp_attr set = { 0 }, out;
		set.size = 1000;
		cr_assert_eq(ulp_ns_setattr(st, ino, &set, ULP_SET_SIZE, &out),
		             0);
		expect_content(st, ino, b, 1000);
	}
	sync_ok(st);
	for (int i = 0; i < 15; i++) {
		char name[16];
		snprintf(name, sizeof name, "r%d", i);
		expect_content(st, lookup(st, ULP_ROOT_INO, name), b, 1000);
	}
	ulp_store_close(st);
}

Test(store, staging_limit_blocks_writers)
{
	ulp_store_opts o = { 0 };
	uint8_t *data = malloc(300000);
	ulp_store_stats s;

	cr_assert(data);
	o.settle_ms = 1;
	o.encoder_threads = 1;
	o.staging_limit = 256 << 10;
	ulp_store *st = open_opts(&o);
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_eq(s.staging_limit, 256 << 10);
	for (int i = 0; i < 8; i++) {
		char name[16];
		ulp_attr a;
		ulp_file *f;
		snprintf(name, sizeof name, "s%d", i);
		fill_random(data, 300000, 400 + (uint64_t)i);
		cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, name, 0644, 0, 0,
		                           &a),
		             0);
		cr_assert_eq(ulp_file_open(st, a.ino, O_WRONLY, &f, NULL), 0);
		write_all(f, data, 300000, 0);
		/* Earlier files had to be encoded for this one to fit. */
		cr_assert_eq(ulp_store_stats_get(st, &s), 0);
		cr_assert_leq(s.staged_bytes, 300000 + (256 << 10),
		              "staged %llu",
		              (unsigned long long)s.staged_bytes);
		ulp_file_release(f);
	}
	sync_ok(st);
	for (int i = 0; i < 8; i++) {
		char name[16];
		snprintf(name, sizeof name, "s%d", i);
		fill_random(data, 300000, 400 + (uint64_t)i);
		expect_content(st, lookup(st, ULP_ROOT_INO, name), data,
		               300000);
	}
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_eq(s.staged_bytes, 0);
	ulp_store_close(st);
	free(data);
}

/* ------------------------------------------------------------ snapshots,
 * history */

typedef struct snap_seen {
	int n;
	char path[64];
	uint64_t vid;
} snap_seen;

static int snap_item(void *opaque, const char *path, const ulp_version_info *v)
{
	snap_seen *s = opaque;

	s->n++;
	snprintf(s->path, sizeof s->path, "%s", path);
	s->vid = v->id;
	return 0;
}

Test(store, snapshot_pins_survive_unlink_gc_and_prune)
{
	ulp_store *st = open_default();
	sfile v = st_make(16 * 1024, 64, 41);
	uint64_t d = mkdir_in(st, ULP_ROOT_INO, "ck");
	uint64_t ino = put_file(st, d, "m.safetensors", v.p, v.len);
	uint64_t items = 0, vid, dropped = 0;
	ulp_version_info pinned, found;
	snap_seen seen = { 0 };

	sync_ok(st);
	pinned = current(st, ino);
	cr_assert_eq(ulp_snapshot_create(st, "s1", NULL, 0, &items), 0);
	cr_assert_eq(items, 1);
	cr_assert_eq(ulp_snapshot_create(st, "s1", NULL, 0, NULL), -EEXIST);
	cr_assert_eq(ulp_snapshot_create(st, "a/b", NULL, 0, NULL), -EINVAL);
	cr_assert_eq(ulp_snapshot_lookup(st, "s1", "ck", &vid), 2);
	cr_assert_eq(ulp_snapshot_lookup(st, "s1", "ck/m.safetensors", &vid),
	             1);
	cr_assert_eq(vid, pinned.id);
	cr_assert_eq(ulp_snapshot_lookup(st, "s1", "nope", &vid), -ENOENT);

	/* Two more versions; prune to the newest one: the pinned first one
	 * stays live. */
	for (int i = 0; i < 2; i++) {
		st_step(&v, 50 + (uint64_t)i);
		put_file(st, d, "m.safetensors", v.p, v.len);
		sync_ok(st);
	}
	cr_assert_eq(ulp_version_prune(st, "ck/m.safetensors", 1, 0, &dropped),
	             0);
	if (dropped != 1) {
		/* Seen once in CI (ASan build, loaded machine), never
		 * reproduced: say what the store held. */
		ulp_version_info now = current(st, ino);
		ulp_store_stats ss;
		ulp_store_stats_get(st, &ss);
		for (uint64_t q = 1; q <= 4; q++)
			if (ulp_version_find(st, "ck/m.safetensors", q,
			                     &found) == 0)
				cr_log_error("version %" PRIu64 ": id %" PRIu64
				             " state %d ref %" PRIu64,
				             q, found.id, found.state,
				             found.ref);
		cr_log_error("current id %" PRIu64 ", queued %" PRIu64
		             ", staged %" PRIu64 " bytes, discards %" PRIu64,
		             now.id, ss.queued, ss.staged_bytes, ss.discards);
	}
	cr_assert_eq(dropped, 1,
	             "only the unpinned middle version goes (dropped %" PRIu64
	             ")",
	             dropped);
	cr_assert_eq(ulp_store_gc(st), 0); /* rebase the newest off it */
	cr_assert_eq(ulp_version_find(st, "ck/m.safetensors", 1, &found), 0);
	cr_assert_eq(found.id, pinned.id);
	cr_assert_eq(ulp_version_find(st, "ck/m.safetensors", 2, &found),
	             -ENOENT);
	cr_assert_eq(ulp_version_find(st, "ck/m.safetensors", 0, &found), 0);
	cr_assert_eq(found.seq, 3);

	/* The file goes; the pinned version survives gc. */
	cr_assert_eq(ulp_ns_unlink(st, d, "m.safetensors"), 0);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, pinned.id, &found), 0);
	cr_assert_eq(found.state, ULP_VERSION_LIVE);
	cr_assert_eq(ulp_snapshot_items(st, "s1", "", snap_item, &seen), 0);
	cr_assert_eq(seen.n, 1);
	cr_assert_str_eq(seen.path, "ck/m.safetensors");
	check_integrity(st);

	/* Deleting the snapshot releases it. */
	cr_assert_eq(ulp_snapshot_delete(st, "s1"), 0);
	cr_assert_eq(ulp_snapshot_delete(st, "s1"), -ENOENT);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, pinned.id, &found), 0);
	cr_assert_neq(found.state, ULP_VERSION_LIVE);
	ulp_store_close(st);
	free(v.p);
}

/* Deleting a snapshot leaves a version it kept as history while its path
 * names a file, and the current version alone; a kept version whose path
 * is gone goes with the snapshot. */
Test(store, snapshot_delete_keeps_history_of_existing_paths)
{
	ulp_store *st = open_default();
	sfile v = st_make(16 * 1024, 64, 45);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "m", v.p, v.len);
	ulp_version_info v1, v2, got;

	sync_ok(st);
	v1 = current(st, ino);
	cr_assert_eq(ulp_snapshot_create(st, "s", NULL, 0, NULL), 0);
	st_step(&v, 46);
	put_file(st, ULP_ROOT_INO, "m", v.p, v.len);
	sync_ok(st);
	v2 = current(st, ino);
	cr_assert_neq(v2.id, v1.id);
	cr_assert_eq(ulp_snapshot_delete(st, "s"), 0);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, v1.id, &got), 0);
	cr_assert_eq(got.state, ULP_VERSION_LIVE, "history of m stays");
	cr_assert_eq(ulp_version_get(st, v2.id, &got), 0);
	cr_assert_eq(got.state, ULP_VERSION_LIVE, "the current version stays");

	/* m goes while a snapshot keeps its current version: its history
	 * goes, the kept version when the snapshot does. */
	cr_assert_eq(ulp_snapshot_create(st, "t", NULL, 0, NULL), 0);
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "m"), 0);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, v1.id, &got), 0);
	cr_assert_neq(got.state, ULP_VERSION_LIVE, "m's history went with m");
	cr_assert_eq(ulp_version_get(st, v2.id, &got), 0);
	cr_assert_eq(got.state, ULP_VERSION_LIVE, "t keeps m's last version");
	cr_assert_eq(ulp_snapshot_delete(st, "t"), 0);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, v2.id, &got), 0);
	cr_assert_neq(got.state, ULP_VERSION_LIVE, "released with t");
	check_integrity(st);
	ulp_store_close(st);
	free(v.p);
}

Test(store, version_usage_records_format_and_stats)
{
	ulp_store *st = open_default();
	sfile v = st_make(16 * 1024, 64, 43);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "m.safetensors", v.p, v.len);
	ulp_stats es;
	int fmt;

	sync_ok(st);
	int have = ulp_version_usage(st, current(st, ino).id, &fmt, &es);
	cr_assert_eq(have, 1);
	cr_assert_eq(fmt, ULP_FMT_SAFETENSORS);
	uint64_t in = 0;
	for (int d = 0; d < ULP_DT_COUNT; d++)
		in += es.dt[d].bytes_in;
	cr_assert_gt(in, 0);
	ulp_store_close(st);
	free(v.p);
}

/* ------------------------------------------------------------ baselines */

Test(store, baselines_live_as_long_as_their_version)
{
	ulp_store *st = open_default();
	sfile v = st_make(16 * 1024, 64, 61);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "m.safetensors", v.p, v.len);
	uint64_t b = 0, dropped = 0;
	ulp_version_info found;

	sync_ok(st);
	uint64_t id1 = current(st, ino).id;
	cr_assert_eq(ulp_version_baseline_get(st, id1, "zstd-19", &b), -ENOENT);
	cr_assert_eq(ulp_version_baseline_put(st, id1, "zstd-19", 1234), 0);
	cr_assert_eq(ulp_version_baseline_put(st, id1, "other", 7), 0);
	cr_assert_eq(ulp_version_baseline_get(st, id1, "zstd-19", &b), 0);
	cr_assert_eq(b, 1234);
	cr_assert_eq(ulp_version_baseline_get(st, id1, "other", &b), 0);
	cr_assert_eq(b, 7);
	cr_assert_eq(ulp_version_baseline_put(st, id1, "zstd-19", 1235), 0);
	cr_assert_eq(ulp_version_baseline_get(st, id1, "zstd-19", &b), 0);
	cr_assert_eq(b, 1235, "a put replaces the figure");
	cr_assert_eq(ulp_version_baseline_put(st, id1 + 1000, "zstd-19", 1),
	             -ENOENT, "no figure for a version that does not exist");

	/* A second version; the first is coded against it.  Pruning the
	 * first deletes a leaf: its figures go with it, the second keeps
	 * its own. */
	st_step(&v, 62);
	put_file(st, ULP_ROOT_INO, "m.safetensors", v.p, v.len);
	settle_all(st);
	ulp_version_info v2 = current(st, ino);
	cr_assert_eq(ulp_version_get(st, id1, &found), 0);
	cr_assert_eq(found.ref, v2.id);
	cr_assert_eq(ulp_version_baseline_put(st, v2.id, "zstd-19", 99), 0);
	cr_assert_eq(ulp_version_prune(st, "m.safetensors", 1, 0, &dropped), 0);
	cr_assert_eq(dropped, 1);
	cr_assert_eq(ulp_store_gc(st), 0);
	cr_assert_eq(ulp_version_get(st, id1, &found), 0);
	cr_assert_eq(found.state, ULP_VERSION_DELETED);
	cr_assert_eq(ulp_version_baseline_get(st, id1, "zstd-19", &b), -ENOENT);
	cr_assert_eq(ulp_version_baseline_put(st, id1, "zstd-19", 5), -ENOENT,
	             "no figure for a deleted version");
	cr_assert_eq(ulp_version_get(st, v2.id, &found), 0);
	cr_assert_eq(found.ref, 0, "the second version stays standalone");
	cr_assert_eq(ulp_version_baseline_get(st, v2.id, "zstd-19", &b), 0);
	cr_assert_eq(b, 99);

	/* Unlinking the file deletes its last version (nothing references
	 * it): no row is left behind. */
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "m.safetensors"), 0);
	cr_assert_eq(ulp_store_gc(st), 0);
	ulp_store_close(st);
	cr_assert_eq(cat_sql("SELECT count(*) FROM baselines"), 0,
	             "figures of deleted versions are removed");
	free(v.p);
}

Test(store, migrates_a_v2_catalog)
{
	ulp_store *st = open_default();
	sfile v = st_make(16 * 1024, 64, 63);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "m.safetensors", v.p, v.len);
	uint64_t b = 0;

	sync_ok(st);
	uint64_t id = current(st, ino).id;
	ulp_store_close(st);

	/* What a version-2 ulpfs left: no baselines table, no flips (version
	 * 4), none of version 5's rdev column, xattrs and trigger (a name per
	 * inode), nor version 6's snapshot nodes, nor version 7's sides,
	 * nor version 8's owners and modes, nor version 9's plain flag, nor
	 * version 10's bucket representations. */
	const char *v8[] = {
		"uid", "gid", "perm", "reach", "reach_users", "acl"
	};
	for (size_t i = 0; i < 6; i++) {
		char q[80];
		snprintf(q, sizeof q, "ALTER TABLE versions DROP COLUMN %s",
		         v8[i]);
		cat_sql(q);
	}
	cat_sql("ALTER TABLE versions DROP COLUMN plain");
	cat_sql("DROP TABLE bucket_reps");
	cat_sql("DROP INDEX versions_side");
	cat_sql("ALTER TABLE versions DROP COLUMN side");
	cat_sql("DROP TABLE snapshot_xattrs");
	cat_sql("DROP TABLE snapshot_nodes");
	cat_sql("DROP TRIGGER inodes_drop_xattrs");
	cat_sql("DROP TABLE xattrs");
	cat_sql("ALTER TABLE inodes DROP COLUMN rdev");
	cat_sql("DROP INDEX dirents_ino");
	cat_sql("DROP TABLE baselines");
	cat_sql("DROP INDEX versions_flip");
	cat_sql("ALTER TABLE versions DROP COLUMN flip");
	cat_sql("UPDATE meta SET value = 2 WHERE key = 'schema_version'");
	cr_assert_eq(cat_sql("SELECT count(*) FROM sqlite_master WHERE name"
	                     " = 'baselines'"),
	             0);

	st = open_default();
	expect_content(st, ino, v.p, v.len);
	cr_assert_eq(ulp_version_baseline_get(st, id, "zstd-19", &b), -ENOENT);
	cr_assert_eq(ulp_version_baseline_put(st, id, "zstd-19", 4321), 0);
	ulp_store_close(st);
	cr_assert_eq(cat_sql("SELECT value FROM meta WHERE key ="
	                     " 'schema_version'"),
	             10);
	cr_assert_eq(cat_sql("SELECT count(*) FROM "
	                     "pragma_table_info('versions')"
	                     " WHERE name = 'plain'"),
	             1, "the plain column (schema 9)");
	cr_assert_eq(cat_sql("SELECT count(*) FROM "
	                     "pragma_table_info('versions')"
	                     " WHERE name = 'side'"),
	             1, "the side column is back");
	cr_assert_eq(cat_sql("SELECT count(*) FROM "
	                     "pragma_table_info('versions') WHERE name IN "
	                     "('uid', 'gid', 'perm', 'reach', "
	                     "'reach_users', 'acl')"),
	             6, "who may read each version (schema 8)");
	cr_assert_eq(cat_sql("SELECT count(*) FROM sqlite_master WHERE name"
	                     " IN ('xattrs', 'inodes_drop_xattrs',"
	                     " 'dirents_ino', 'snapshot_nodes',"
	                     " 'snapshot_xattrs')"),
	             5);
	cr_assert_eq(cat_sql("SELECT count(*) FROM sqlite_master WHERE name"
	                     " = 'bucket_reps'"),
	             1, "the bucket representations (schema 10)");

	st = open_default();
	expect_content(st, ino, v.p, v.len);
	cr_assert_eq(ulp_version_baseline_get(st, id, "zstd-19", &b), 0);
	cr_assert_eq(b, 4321, "the figure survives a reopen");
	ulp_store_close(st);

	/* A catalog from a newer ulpfs is refused, untouched. */
	cat_sql("UPDATE meta SET value = 11 WHERE key = 'schema_version'");
	cr_assert_eq(ulp_store_open(store_dir(), NULL, &st), -EPROTO);
	cr_assert_eq(cat_sql("SELECT value FROM meta WHERE key ="
	                     " 'schema_version'"),
	             11);
	free(v.p);
}

Test(store, special_files)
{
	ulp_store *st = open_default();
	ulp_attr a, b;

	cr_assert_eq(ulp_ns_mknod(st, ULP_ROOT_INO, "fifo", S_IFIFO | 0640, 99,
	                          0, 0, &a),
	             0);
	cr_assert(S_ISFIFO(a.mode));
	cr_assert_eq(a.rdev, 0, "a FIFO has no device number");
	cr_assert_eq(ulp_ns_mknod(st, ULP_ROOT_INO, "null", S_IFCHR | 0666,
	                          makedev(1, 3), 0, 0, &b),
	             0);
	cr_assert_eq(ulp_ns_mknod(st, ULP_ROOT_INO, "null", S_IFBLK | 0666, 1,
	                          0, 0, &a),
	             -EEXIST);
	cr_assert_eq(ulp_ns_mknod(st, ULP_ROOT_INO, "dir", S_IFDIR | 0755, 0, 0,
	                          0, &a),
	             -EINVAL, "mknod makes no directory");
	ulp_store_close(st);
	st = open_default();
	cr_assert_eq(ulp_ns_lookup(st, ULP_ROOT_INO, "null", &a), 0);
	cr_assert_eq(a.ino, b.ino);
	cr_assert_eq(a.mode, S_IFCHR | 0666);
	cr_assert_eq(a.rdev, makedev(1, 3), "the device number is kept");
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "null"), 0);
	cr_assert_eq(ulp_ns_lookup(st, ULP_ROOT_INO, "null", &a), -ENOENT);
	ulp_store_close(st);
}

Test(store, xattrs)
{
	ulp_store *st = open_default();
	ulp_attr a, d;
	char buf[128];
	static char big[ULP_XATTR_SIZE_MAX + 1];

	cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, "f", 0644, 0, 0, &a), 0);
	cr_assert_eq(ulp_xattr_set(st, a.ino, "user.a", "1", 1, 0), 0);
	cr_assert_eq(ulp_xattr_set(st, a.ino, "user.a", "22", 2,
	                           ULP_XATTR_CREATE),
	             -EEXIST);
	cr_assert_eq(ulp_xattr_set(st, a.ino, "user.b", "2", 1,
	                           ULP_XATTR_REPLACE),
	             -ENODATA);
	cr_assert_eq(ulp_xattr_set(st, a.ino, "security.b", "xyz", 3, 0), 0);
	cr_assert_eq(ulp_xattr_set(st, a.ino, "other.b", "2", 1, 0),
	             -EOPNOTSUPP);
	cr_assert_eq(ulp_xattr_set(st, a.ino, "user.big", big, sizeof big, 0),
	             -E2BIG);
	cr_assert_eq(ulp_xattr_get(st, a.ino, "user.a", NULL, 0), 1);
	cr_assert_eq(ulp_xattr_get(st, a.ino, "security.b", buf, 2), -ERANGE);
	cr_assert_eq(ulp_xattr_get(st, a.ino, "user.none", buf, 8), -ENODATA);
	cr_assert_eq(ulp_xattr_list(st, a.ino, NULL, 0), 18);
	cr_assert_eq(ulp_xattr_list(st, a.ino, buf, 4), -ERANGE);
	ulp_store_close(st);

	st = open_default();
	cr_assert_eq(ulp_xattr_list(st, a.ino, buf, sizeof buf), 18);
	cr_assert_eq(memcmp(buf, "security.b\0user.a\0", 18), 0,
	             "sorted names survive a reopen");
	cr_assert_eq(ulp_xattr_get(st, a.ino, "security.b", buf, sizeof buf),
	             3);
	cr_assert_eq(memcmp(buf, "xyz", 3), 0);
	cr_assert_eq(ulp_xattr_remove(st, a.ino, "user.a"), 0);
	cr_assert_eq(ulp_xattr_remove(st, a.ino, "user.a"), -ENODATA);

	/* An inherited default ACL (user::rwx user:99:rwx group::r-x
	 * mask::rwx other::r-x) masks a new file's mode, which masks it. */
	static const unsigned char acl[] = {
		2,    0,    0,    0, 1,    0,    7,    0,    0xff,
		0xff, 0xff, 0xff, 2, 0,    7,    0,    99,   0,
		0,    0,    4,    0, 5,    0,    0xff, 0xff, 0xff,
		0xff, 0x10, 0,    7, 0,    0xff, 0xff, 0xff, 0xff,
		0x20, 0,    5,    0, 0xff, 0xff, 0xff, 0xff,
	};
	cr_assert_eq(ulp_ns_mkdir(st, ULP_ROOT_INO, "d", 0755, 0, 0, &d), 0);
	cr_assert_eq(ulp_xattr_set(st, d.ino, ULP_ACL_DEFAULT, acl, sizeof acl,
	                           0),
	             0);
	cr_assert_eq(ulp_ns_create(st, d.ino, "g", 0640, 0, 0, &a), 0);
	cr_assert_eq(a.mode, S_IFREG | 0640, "the mode is masked by the ACL");
	unsigned char got[sizeof acl];
	cr_assert_eq(ulp_xattr_get(st, a.ino, ULP_ACL_ACCESS, got, sizeof got),
	             (ssize_t)sizeof acl);
	cr_assert_eq(got[30], 4, "the mask became r-- (the mode's group bits)");
	cr_assert_eq(ulp_xattr_get(st, a.ino, ULP_ACL_DEFAULT, NULL, 0),
	             -ENODATA, "a file has no default ACL");
	cr_assert_eq(ulp_ns_mkdir(st, d.ino, "sub", 0777, 0, 0, &a), 0);
	cr_assert_eq(ulp_xattr_get(st, a.ino, ULP_ACL_DEFAULT, NULL, 0),
	             (ssize_t)sizeof acl, "a directory inherits it as default");
	cr_assert_eq(ulp_acl_default_of(st, d.ino), 1);
	cr_assert_eq(ulp_acl_default_of(st, ULP_ROOT_INO), 0);

	/* Attributes go with their inode. */
	cr_assert_eq(ulp_ns_unlink(st, d.ino, "g"), 0);
	cr_assert_eq(ulp_ns_rmdir(st, d.ino, "sub"), 0);
	cr_assert_eq(cat_sql("SELECT count(*) FROM xattrs"), 2);
	ulp_store_close(st);
}

/* Snapshots keep whole inodes (schema 6): special files, symlinks, empty
 * directories, owners, xattrs, hard links, across a reopen; deleting the
 * snapshot drops what it recorded. */
static int count_name(void *opaque, const char *name)
{
	(void)name;
	(*(int *)opaque)++;
	return 0;
}

Test(store, snapshot_nodes)
{
	ulp_store *st = open_default();
	ulp_attr d, e, fi, sl, a;
	ulp_snapshot_node n;
	char buf[64];
	int names = 0;

	cr_assert_eq(ulp_ns_mkdir(st, ULP_ROOT_INO, "d", S_IFDIR | 0750, 5, 6,
	                          &d),
	             0);
	cr_assert_eq(ulp_ns_mkdir(st, d.ino, "empty", S_IFDIR | 0700, 0, 0, &e),
	             0);
	cr_assert_eq(ulp_ns_mknod(st, d.ino, "null", S_IFCHR | 0600,
	                          makedev(1, 3), 12, 34, &a),
	             0);
	cr_assert_eq(ulp_xattr_set(st, a.ino, "trusted.t", "v", 1, 0), 0);
	cr_assert_eq(ulp_ns_symlink(st, d.ino, "sl", "null", 0, 0, &sl), 0);
	uint64_t f = put_file(st, d.ino, "f", "data", 4);
	cr_assert_eq(ulp_ns_link(st, f, ULP_ROOT_INO, "f2", &fi), 0);
	sync_ok(st);
	cr_assert_eq(ulp_snapshot_create(st, "s", NULL, 0, NULL), 0);
	/* Changes after it do not show. */
	cr_assert_eq(ulp_xattr_set(st, a.ino, "trusted.t", "w", 1, 0), 0);
	cr_assert_eq(ulp_ns_unlink(st, d.ino, "null"), 0);
	cr_assert_eq(ulp_ns_rmdir(st, d.ino, "empty"), 0);
	ulp_store_close(st);

	st = open_default();
	cr_assert_eq(ulp_snapshot_node_get(st, "s", "d/null", &n), 0);
	cr_assert(n.recorded);
	cr_assert_eq(n.a.mode, S_IFCHR | 0600);
	cr_assert_eq(n.a.rdev, makedev(1, 3));
	cr_assert_eq(n.a.uid, 12);
	cr_assert_eq(ulp_snapshot_xattr_get(st, "s", n.a.ino, "trusted.t", buf,
	                                    sizeof buf),
	             1);
	cr_assert_eq(buf[0], 'v', "the value the snapshot saw");
	cr_assert_eq(ulp_snapshot_xattr_list(st, "s", n.a.ino, buf, sizeof buf),
	             10);
	cr_assert_eq(ulp_snapshot_node_get(st, "s", "d", &n), 0);
	cr_assert_eq(n.a.mode, S_IFDIR | 0750);
	cr_assert_eq(n.a.gid, 6);
	cr_assert_eq(n.a.nlink, 3, "d and its subdirectory empty");
	cr_assert_eq(ulp_snapshot_node_get(st, "s", "d/empty", &n), 0);
	cr_assert(S_ISDIR(n.a.mode));
	cr_assert_eq(ulp_snapshot_readlink(st, "s", "d/sl", buf, sizeof buf),
	             0);
	cr_assert_str_eq(buf, "null");
	cr_assert_eq(ulp_snapshot_readlink(st, "s", "d/f", buf, sizeof buf),
	             -EINVAL);
	cr_assert_eq(ulp_snapshot_node_get(st, "s", "d/f", &n), 0);
	cr_assert_eq(n.a.nlink, 2);
	cr_assert_eq(n.a.size, 4);
	cr_assert_neq(n.version, 0);
	uint64_t ino = n.a.ino;
	cr_assert_eq(ulp_snapshot_node_get(st, "s", "f2", &n), 0);
	cr_assert_eq(n.a.ino, ino, "hard links: one inode");
	cr_assert_eq(ulp_snapshot_node_get(st, "s", "d/none", &n), -ENOENT);
	cr_assert_eq(ulp_snapshot_children(st, "s", "d", count_name, &names),
	             0);
	cr_assert_eq(names, 4, "empty, f, null, sl");
	cr_assert_eq(ulp_snapshot_xattr_get(st, "s", 999999, "trusted.t", buf,
	                                    sizeof buf),
	             -ENOENT);
	cr_assert_eq(ulp_snapshot_delete(st, "s"), 0);
	cr_assert_eq(ulp_snapshot_node_get(st, "s", "d", &n), -ENOENT);
	ulp_store_close(st);
	cr_assert_eq(cat_sql("SELECT (SELECT count(*) FROM snapshot_nodes) +"
	                     " (SELECT count(*) FROM snapshot_xattrs)"),
	             0, "deleting a snapshot drops what it recorded");
}

Test(store, hard_links)
{
	ulp_store *st = open_default();
	ulp_attr a, b, d;
	ulp_version_info v;
	sfile c = st_make(16 * 1024, 64, 65);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "a", c.p, c.len);

	sync_ok(st);
	cr_assert_eq(ulp_ns_mkdir(st, ULP_ROOT_INO, "d", 0755, 0, 0, &d), 0);
	cr_assert_eq(ulp_ns_link(st, ino, d.ino, "b", &b), 0);
	cr_assert_eq(b.ino, ino);
	cr_assert_eq(b.nlink, 2);
	cr_assert_eq(ulp_ns_link(st, ino, d.ino, "b", &b), -EEXIST);
	cr_assert_eq(ulp_ns_link(st, d.ino, ULP_ROOT_INO, "dl", &b), -EPERM,
	             "no hard links to directories");
	cr_assert_eq(ulp_version_find(st, "d/b", 0, &v), 0,
	             "the history is found through the other name");
	cr_assert_eq(v.ino, ino);
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "a"), 0);
	cr_assert_eq(ulp_ns_getattr(st, ino, &a), 0, "the data stays");
	cr_assert_eq(a.nlink, 1);
	expect_content(st, ino, c.p, c.len);
	cr_assert_eq(ulp_version_find(st, "d/b", 1, &v), 0,
	             "the versions followed the inode to its other name");
	ulp_store_close(st);
	st = open_default();
	expect_content(st, ino, c.p, c.len);
	cr_assert_eq(ulp_ns_unlink(st, d.ino, "b"), 0);
	cr_assert_eq(ulp_ns_getattr(st, ino, &a), -ENOENT);
	cr_assert_eq(ulp_version_find(st, "d/b", 0, &v), -ENOENT);
	ulp_store_close(st);
	free(c.p);
}
