/*
 * test_copyup.c - unit tests of copy-up on demand: opening a committed
 * file for writing without O_TRUNC decodes nothing, reads merge what was
 * written with the committed version, truncation and growth on top, and a
 * crash before the last close keeps the committed version while one after
 * it keeps the new content.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "store/store.h"
#include "ulpfs/ulp.h"

#include "test_store_util.h"

TestSuite(copyup, .init = setup, .fini = teardown);

static void set_size(ulp_store *st, uint64_t ino, uint64_t size)
{
	ulp_attr a = { 0 }, out;

	a.size = size;
	int rc = ulp_ns_setattr(st, ino, &a, ULP_SET_SIZE, &out);
	cr_assert_eq(rc, 0, "truncate: %s", strerror(-rc));
	cr_assert_eq(out.size, size);
}

/* A committed file of three chunks (bf16 weights, 6 MiB). */
static sfile commit_big(ulp_store *st, uint64_t *ino)
{
	sfile v = st_make(64 * 48 * 1024, 1000, 7);

	*ino = put_file(st, ULP_ROOT_INO, "model", v.p, v.len);
	sync_ok(st);
	return v;
}

Test(copyup, open_decodes_nothing_and_reads_merge)
{
	ulp_store *st = open_default();
	uint64_t ino;
	sfile v1 = commit_big(st, &ino);
	sfile v2 = st_copy(&v1);
	ulp_version_info a = current(st, ino);
	ulp_file *f, *g;
	uint8_t patch[4096], buf[3 * 4096];

	uint64_t d0 = cache_decodes(st);
	cr_assert_eq(ulp_file_open(st, ino, O_RDWR, &f, NULL), 0);
	cr_assert_eq(cache_decodes(st), d0, "open decoded the file");
	cr_assert(ulp_file_partial(f));
	/* Patch 4 KiB in the middle, not aligned to anything. */
	size_t mid = v1.len / 2 + 123;
	fill_random(patch, sizeof patch, 99);
	write_all(f, patch, sizeof patch, (off_t)mid);
	memcpy(v2.p + mid, patch, sizeof patch);
	cr_assert_eq(cache_decodes(st), d0, "a write decoded the file");
	/* A read across the patch: committed bytes on both sides. */
	cr_assert_eq(ulp_file_read(f, buf, sizeof buf, (off_t)(mid - 4096)),
	             (ssize_t)sizeof buf);
	cr_assert(memcmp(buf, v2.p + mid - 4096, sizeof buf) == 0);
	/* Appends through a second handle. */
	cr_assert_eq(ulp_file_open(st, ino, O_WRONLY | O_APPEND, &g, NULL), 0);
	const char line[] = "one more line\n";
	cr_assert_eq(ulp_file_write(g, line, sizeof line - 1, 0),
	             (ssize_t)(sizeof line - 1));
	ulp_file_release(g);
	ulp_file_release(f);
	uint8_t *want = malloc(v2.len + sizeof line);
	cr_assert(want);
	memcpy(want, v2.p, v2.len);
	memcpy(want + v2.len, line, sizeof line - 1);
	/* Closed: read through the overlay or, once committed, the version. */
	expect_content(st, ino, want, v2.len + sizeof line - 1);
	sync_ok(st);
	expect_content(st, ino, want, v2.len + sizeof line - 1);
	ulp_version_info b = current(st, ino);
	cr_assert_neq(a.id, b.id);
	cr_assert_eq(b.size, v2.len + sizeof line - 1);
	expect_version(st, a.id, v1.p, v1.len);
	expect_version(st, b.id, want, b.size);
	/* Coded against a: the chunk not written is identical, not coded
	 * again, and the new version stores about what changed. */
	int fmt;
	ulp_stats es;
	cr_assert_eq(b.ref, a.id, "coded against %llu, not the base",
	             (unsigned long long)b.ref);
	cr_assert_eq(ulp_version_usage(st, b.id, &fmt, &es), 1);
	cr_assert_geq(es.chunks_copy, 1, "no chunk coded as identical");
	cr_assert_lt(b.stored, a.stored / 2, "stored %llu of %llu",
	             (unsigned long long)b.stored,
	             (unsigned long long)a.stored);
	check_integrity(st);
	ulp_store_close(st);
	free(want);
	free(v1.p);
	free(v2.p);
}

Test(copyup, truncate_then_grow_reads_zeros)
{
	ulp_store *st = open_default();
	uint64_t ino;
	sfile v1 = commit_big(st, &ino);
	ulp_file *f;
	size_t half = v1.len / 2, len = v1.len + 5000;
	uint8_t *want = calloc(1, len);

	cr_assert(want);
	cr_assert_eq(ulp_file_open(st, ino, O_RDWR, &f, NULL), 0);
	set_size(st, ino, half);
	set_size(st, ino, v1.len);
	/* A write past the end leaves a gap of zeros behind it. */
	write_all(f, "tail", 4, (off_t)(len - 4));
	memcpy(want, v1.p, half);
	memcpy(want + len - 4, "tail", 4);
	expect_content(st, ino, want, len);
	ulp_file_release(f);
	sync_ok(st);
	expect_content(st, ino, want, len);
	/* Truncating a committed file by name copies up on demand too. */
	set_size(st, ino, 1000);
	sync_ok(st);
	expect_content(st, ino, want, 1000);
	check_integrity(st);
	ulp_store_close(st);
	free(want);
	free(v1.p);
}

/* In a child: open the store (no encode before the crash), patch the
 * file at off, close it or not, then die as kill -9 would. */
static void crash_child(uint64_t ino, size_t off, int close_it)
{
	ulp_store_opts o = { 0 };
	ulp_store *st;
	ulp_file *f;

	o.settle_ms = 3600 * 1000;
	o.encoder_threads = 1;
	if (ulp_store_open(store_dir(), &o, &st) ||
	    ulp_file_open(st, ino, O_RDWR, &f, NULL) ||
	    ulp_file_write(f, "PATCHED", 7, (off_t)off) != 7)
		_exit(3);
	if (close_it)
		ulp_file_release(f);
	raise(SIGKILL);
	_exit(4);
}

static void run_crash(uint64_t ino, size_t off, int close_it)
{
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (pid == 0)
		crash_child(ino, off, close_it);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	          "child status %d", status);
}

Test(copyup, kill9_before_close_keeps_old_after_close_new)
{
	ulp_store *st = open_default();
	uint64_t ino;
	sfile v1 = commit_big(st, &ino);
	ulp_version_info a = current(st, ino);
	ulp_store_close(st);

	size_t off = v1.len - 3000;
	run_crash(ino, off, 0);
	st = open_default();
	sync_ok(st);
	expect_content(st, ino, v1.p, v1.len);
	cr_assert_eq(current(st, ino).id, a.id, "a new version appeared");
	check_integrity(st);
	ulp_store_close(st);

	run_crash(ino, off, 1);
	st = open_default();
	sync_ok(st);
	memcpy(v1.p + off, "PATCHED", 7);
	expect_content(st, ino, v1.p, v1.len);
	cr_assert_neq(current(st, ino).id, a.id);
	check_integrity(st);
	ulp_store_close(st);
	free(v1.p);
}

Test(copyup, damaged_map_keeps_the_committed_version)
{
	ulp_store *st = open_default();
	uint64_t ino;
	sfile v1 = commit_big(st, &ino);
	char p[400];
	ulp_store_close(st);

	run_crash(ino, 100, 1);
	snprintf(p, sizeof p, "%s/staging/%llu.cu", store_dir(),
	         (unsigned long long)ino);
	FILE *fp = fopen(p, "r+");
	cr_assert(fp, "no copy-up map %s", p);
	cr_assert_eq(fseek(fp, 20, SEEK_SET), 0);
	cr_assert_eq(fputc(0x5a, fp), 0x5a);
	fclose(fp);
	st = open_default();
	sync_ok(st);
	expect_content(st, ino, v1.p, v1.len);
	check_integrity(st);
	cr_assert(!exists_in("staging", strrchr(p, '/') + 1));
	ulp_store_close(st);
	free(v1.p);
}

/* A file without tensors (a log, an event file): the chunks left whole
 * are not copied into staging at all, the encoder reads them from the
 * version, and only the chunks written into are decoded, at commit; the
 * bytes of every version stay exact. */
Test(copyup, generic_file_patch_and_append)
{
	ulp_store *st = open_default();
	size_t len = (17u << 20) + 12345;
	uint8_t *v = malloc(len + 100);
	ulp_file *f;

	cr_assert(v);
	fill_random(v, len, 17);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "log", v, len);
	sync_ok(st);
	ulp_version_info a = current(st, ino);
	uint64_t d0 = cache_decodes(st);
	cr_assert_eq(ulp_file_open(st, ino, O_RDWR, &f, NULL), 0);
	/* Across a chunk boundary (2 MiB), and an append. */
	write_all(f, "patched across a boundary", 25, (off_t)(4u << 20) - 10);
	memcpy(v + (4u << 20) - 10, "patched across a boundary", 25);
	write_all(f, "appended\n", 9, (off_t)len);
	memcpy(v + len, "appended\n", 9);
	ulp_file_release(f);
	sync_ok(st);
	/* The commit decoded the chunks written into (their other bytes)
	 * and nothing else: the version's hash takes the unchanged chunks'
	 * hashes from the base's index. */
	cr_assert_eq(cache_decodes(st) - d0, 3, "%llu chunks decoded, want 3",
	             (unsigned long long)(cache_decodes(st) - d0));
	ulp_version_info b = current(st, ino);
	expect_content(st, ino, v, len + 9);
	expect_version(st, b.id, v, len + 9);
	cr_assert_eq(b.ref, a.id);
	int fmt;
	ulp_stats es;
	cr_assert_eq(ulp_version_usage(st, b.id, &fmt, &es), 1);
	/* chunks 0 and 3-7 of 0-8 whole and untouched; 1, 2 patched; 8
	 * appended */
	cr_assert_eq(es.chunks_copy, 6, "%llu chunks coded as identical",
	             (unsigned long long)es.chunks_copy);
	cr_assert_lt(b.stored, 64u << 10, "stored %llu",
	             (unsigned long long)b.stored);
	fill_random(v, len, 17);
	expect_version(st, a.id, v, len);
	check_integrity(st);
	free(v);
	ulp_store_close(st);
}

/* Patch len bytes of committed file ino at off with random bytes (in v
 * too), commit it, and return the number of chunks the commit decoded. */
static uint64_t patch_commit(ulp_store *st, uint64_t ino, sfile *v, size_t off,
                             size_t len, uint64_t seed)
{
	uint8_t *p = malloc(len);
	ulp_file *f;

	cr_assert(p);
	fill_random(p, len, seed);
	cr_assert_eq(ulp_file_open(st, ino, O_RDWR, &f, NULL), 0);
	write_all(f, p, len, (off_t)off);
	memcpy(v->p + off, p, len);
	uint64_t d0 = cache_decodes(st);
	ulp_file_release(f);
	sync_ok(st);
	free(p);
	return cache_decodes(st) - d0;
}

static ulp_stats usage(ulp_store *st, uint64_t vid)
{
	int fmt;
	ulp_stats es;

	cr_assert_eq(ulp_version_usage(st, vid, &fmt, &es), 1);
	return es;
}

/* A safetensors file patched in place inside its tensors, or appended
 * to: the new version is cut into the base's chunks, those left whole
 * are coded as identical without being decoded or filled, and only the
 * chunk written into is decoded (its other bytes); every version stays
 * exact, also after the store is opened again.  A patch of the header
 * codes the file as any other (its map parsed again), exactly. */
Test(copyup, tensor_file_patch_decodes_only_what_it_touches)
{
	ulp_store *st = open_default();
	/* bf16 weights of 8 MiB, fp32 bias, i64 step: five chunks */
	sfile v1 = st_make(64 * 64 * 1024, 1000, 7);
	uint64_t ino =
		put_file(st, ULP_ROOT_INO, "model.safetensors", v1.p, v1.len);
	sync_ok(st);
	sfile v = st_copy(&v1);
	ulp_version_info a = current(st, ino);
	ulp_file *f;

	/* 4 KiB in the middle of the weights, inside chunk 2 */
	uint64_t dec = patch_commit(st, ino, &v, v.len / 2 + 123, 4096, 41);
	cr_assert_eq(dec, 1, "the 4 KiB patch decoded %llu chunks, want 1",
	             (unsigned long long)dec);
	ulp_version_info b = current(st, ino);
	cr_assert_eq(b.ref, a.id);
	ulp_stats es = usage(st, b.id);
	cr_assert_eq(es.chunks_copy, 4, "%llu chunks coded as identical",
	             (unsigned long long)es.chunks_copy);
	cr_assert_lt(b.stored, 64u << 10, "stored %llu",
	             (unsigned long long)b.stored);
	cr_assert_eq(b.layout, a.layout);
	expect_version(st, b.id, v.p, v.len);

	/* Across the end of the weights into the bias (two tensors, one
	 * after the other, in the last two chunks) */
	sfile v2 = st_copy(&v);
	dec = patch_commit(st, ino, &v, v.data + 2 * v.n16 - 100, 300, 42);
	cr_assert_leq(dec, 2, "a patch of two tensors decoded %llu chunks",
	              (unsigned long long)dec);
	ulp_version_info c = current(st, ino);
	cr_assert_eq(c.ref, b.id);
	cr_assert_geq(usage(st, c.id).chunks_copy, 3);
	expect_version(st, c.id, v.p, v.len);

	/* An append: the header the same, the map too (a parse of the new
	 * bytes agrees); only the last chunk, which grows, is decoded */
	sfile v3 = st_copy(&v);
	const char line[] = "appended\n";
	v.p = realloc(v.p, v.len + sizeof line - 1);
	cr_assert(v.p);
	cr_assert_eq(ulp_file_open(st, ino, O_WRONLY | O_APPEND, &f, NULL), 0);
	uint64_t d0 = cache_decodes(st);
	write_all(f, line, sizeof line - 1, 0);
	memcpy(v.p + v.len, line, sizeof line - 1);
	v.len += sizeof line - 1;
	ulp_file_release(f);
	sync_ok(st);
	cr_assert_leq(cache_decodes(st) - d0, 1, "the append decoded %llu",
	              (unsigned long long)(cache_decodes(st) - d0));
	ulp_version_info e = current(st, ino);
	cr_assert_eq(e.ref, c.id);
	cr_assert_eq(e.size, v.len);
	cr_assert_geq(usage(st, e.id).chunks_copy, 4);
	ulp_tensor_map m;
	cr_assert_eq(ulp_format_parse(v.p, v.len, &m), ULP_OK);
	cr_assert_eq(m.format, ULP_FMT_SAFETENSORS);
	cr_assert_eq(e.layout, ulp_tensor_map_layout_hash(&m));
	ulp_tensor_map_free(&m);
	expect_version(st, e.id, v.p, v.len);

	/* The header: parsed again, the content exact */
	sfile v4 = st_copy(&v);
	cr_assert_eq(ulp_file_open(st, ino, O_RDWR, &f, NULL), 0);
	char *fmt = memmem(v.p, v.data, "\"pt\"", 4);
	cr_assert(fmt);
	write_all(f, "\"PT\"", 4, (off_t)(fmt - (char *)v.p));
	memcpy(fmt, "\"PT\"", 4);
	ulp_file_release(f);
	sync_ok(st);
	ulp_version_info d = current(st, ino);
	cr_assert_neq(d.id, e.id);
	expect_version(st, d.id, v.p, v.len);

	ulp_store_close(st);
	st = open_default();
	expect_version(st, a.id, v1.p, v1.len);
	expect_version(st, b.id, v2.p, v2.len);
	expect_version(st, c.id, v3.p, v3.len);
	expect_version(st, e.id, v4.p, v4.len);
	expect_content(st, ino, v.p, v.len);
	check_integrity(st);
	ulp_store_close(st);
	free(v.p);
	free(v1.p);
	free(v2.p);
	free(v3.p);
	free(v4.p);
}
