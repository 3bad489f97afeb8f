/*
 * test_copyrange.c - unit tests of copy_file_range by reference
 * (ulp_file_copy_version): a committed version copied whole into an empty
 * file decodes nothing, at the copy nor at its commit, stores almost
 * nothing, and outlives the deletion of its source file (before its
 * commit too); so do whole chunks of it at the same offsets (zeros
 * before them), after a reopen too; copies that do not qualify are left
 * to the caller.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "store/store.h"
#include "ulpfs/ulp.h"

#include "test_store_util.h"

TestSuite(copyrange, .init = setup, .fini = teardown);

/* A committed generic file "src" of len random bytes (seed) and an empty
 * file "dst" opened for writing (*f): *a is src's version, *dst dst's
 * inode; the bytes are returned. */
static uint8_t *src_and_dst(ulp_store *st, size_t len, uint64_t seed,
                            ulp_version_info *a, uint64_t *dst, ulp_file **f)
{
	uint8_t *data = malloc(len);
	ulp_attr d;

	cr_assert(data);
	fill_random(data, len, seed);
	uint64_t src = put_file(st, ULP_ROOT_INO, "src", data, len);
	sync_ok(st);
	*a = current(st, src);
	cr_assert_eq(ulp_ns_create(st, ULP_ROOT_INO, "dst", 0644, 0, 0, &d), 0);
	cr_assert_eq(ulp_file_open(st, d.ino, O_WRONLY | O_TRUNC, f, NULL), 0);
	*dst = d.ino;
	return data;
}

/* dst reads p (len bytes) and the store is sound, before and after a
 * reopen; st is closed. */
static void expect_reopened(ulp_store *st, uint64_t dst, const void *p,
                            size_t len)
{
	expect_content(st, dst, p, len);
	check_integrity(st);
	ulp_store_close(st);
	st = open_default();
	expect_content(st, dst, p, len);
	check_integrity(st);
	ulp_store_close(st);
}

Test(copyrange, by_reference_decodes_nothing_and_outlives_its_source)
{
	ulp_store *st = open_default();
	size_t len = (6u << 20) + 100;
	ulp_version_info a;
	uint64_t dst;
	ulp_file *f;
	uint8_t *data = src_and_dst(st, len, 23, &a, &dst, &f);

	uint64_t d0 = cache_decodes(st);
	/* Not whole chunks at the same offsets: the caller copies bytes. */
	cr_assert_eq(ulp_file_copy_version(f, a.id, 1, 0, len), 0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 7, len), 0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0,
	                                   ULP_CHUNK_SIZE_DEFAULT - 1),
	             0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0, SIZE_MAX),
	             (ssize_t)len);
	/* Not empty any more. */
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0, SIZE_MAX), 0);
	ulp_file_release(f);
	sync_ok(st);
	cr_assert_eq(cache_decodes(st), d0, "%llu chunks decoded",
	             (unsigned long long)(cache_decodes(st) - d0));
	ulp_version_info b = current(st, dst);
	cr_assert_eq(b.size, len);
	cr_assert_eq(b.ref, a.id, "coded against %llu",
	             (unsigned long long)b.ref);
	cr_assert_lt(b.stored, 4096, "stored %llu",
	             (unsigned long long)b.stored);
	cr_assert(memcmp(b.hash, a.hash, 16) == 0, "not the source's hash");
	expect_content(st, dst, data, len);
	expect_version(st, b.id, data, len);
	check_integrity(st);
	/* Its source deleted, gc codes the copy against something live (or
	 * alone) and the source's version goes. */
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "src"), 0);
	settle_all(st);
	cr_assert_eq(ulp_version_get(st, a.id, &b), 0);
	cr_assert_eq(b.state, ULP_VERSION_DELETED, "the source's version: %d",
	             b.state);
	expect_reopened(st, dst, data, len);
	free(data);
}

Test(copyrange, source_deleted_before_the_copy_commits)
{
	ulp_store *st = open_default();
	size_t len = (4u << 20) + 1;
	ulp_version_info a;
	uint64_t dst;
	ulp_file *f;
	uint8_t *data = src_and_dst(st, len, 29, &a, &dst, &f);

	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0, SIZE_MAX),
	             (ssize_t)len);
	/* The copy's row names the version: deleting its file keeps it. */
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "src"), 0);
	sync_ok(st);
	expect_version(st, a.id, data, len);
	ulp_file_release(f);
	sync_ok(st);
	expect_content(st, dst, data, len);
	settle_all(st);
	expect_content(st, dst, data, len);
	check_integrity(st);
	ulp_store_close(st);
	st = open_default();
	expect_content(st, dst, data, len);
	ulp_store_close(st);
	free(data);
}

Test(copyrange, only_into_an_empty_sole_writer)
{
	ulp_store *st = open_default();
	uint8_t data[5000];
	ulp_file *f, *g;

	fill_random(data, sizeof data, 3);
	uint64_t src = put_file(st, ULP_ROOT_INO, "src", data, sizeof data);
	uint64_t dst = put_file(st, ULP_ROOT_INO, "dst", "x", 1);
	sync_ok(st);
	ulp_version_info a = current(st, src);
	/* A committed destination opened without O_TRUNC is not empty. */
	cr_assert_eq(ulp_file_open(st, dst, O_WRONLY, &f, NULL), 0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0, SIZE_MAX), 0);
	ulp_file_release(f);
	/* A second writer may be the kernel's own (passthrough) or write
	 * meanwhile: bytes, not a reference. */
	cr_assert_eq(ulp_file_open(st, dst, O_WRONLY | O_TRUNC, &f, NULL), 0);
	cr_assert_eq(ulp_file_open(st, dst, O_WRONLY, &g, NULL), 0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0, SIZE_MAX), 0);
	ulp_file_release(g);
	/* A read-only handle cannot be the destination. */
	cr_assert_eq(ulp_file_open(st, src, O_RDONLY, &g, NULL), 0);
	cr_assert_eq(ulp_file_copy_version(g, a.id, 0, 0, SIZE_MAX), 0);
	ulp_file_release(g);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0, SIZE_MAX),
	             (ssize_t)sizeof data);
	ulp_file_release(f);
	sync_ok(st);
	expect_content(st, dst, data, sizeof data);
	check_integrity(st);
	ulp_store_close(st);
}

/* Whole chunks copied by reference: the file is zeros before them, cut
 * at their end.  Its commit decodes nothing: the chunks copied are coded
 * as identical, hashed from the version's index (its last chunk, partial,
 * too), and the zero chunks before them, all hole, are coded as zeros
 * without the version's chunks there being read. */
Test(copyrange, whole_chunks_at_the_same_offsets)
{
	const size_t chunk = ULP_CHUNK_SIZE_DEFAULT;
	ulp_store *st = open_default();
	size_t len = 6 * chunk + 777;
	ulp_version_info a;
	uint64_t dst;
	ulp_file *f;
	uint8_t *data = src_and_dst(st, len, 31, &a, &dst, &f);
	uint8_t *want = malloc(len);
	cr_assert(want);

	/* Unaligned starts, less than a chunk, and ranges past the end do
	 * not qualify. */
	cr_assert_eq(
		ulp_file_copy_version(f, a.id, chunk + 1, chunk + 1, chunk), 0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, chunk, chunk, chunk - 1),
	             0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, len, len, 1), 0);
	static const struct {
		size_t off, n;
	} cases[] = { { 1, 4 }, { 0, 4 }, { 2, SIZE_MAX } };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t off = cases[i].off * chunk, n = cases[i].n;
		size_t end = n == SIZE_MAX ? len : off + n * chunk;
		if (i)
			cr_assert_eq(ulp_file_open(st, dst, O_WRONLY | O_TRUNC,
			                           &f, NULL),
			             0);
		uint64_t d0 = cache_decodes(st);
		cr_assert_eq(ulp_file_copy_version(f, a.id, off, off,
		                                   n == SIZE_MAX ? n
		                                                 : n * chunk),
		             (ssize_t)(end - off));
		ulp_file_release(f);
		sync_ok(st);
		cr_assert_eq(cache_decodes(st), d0,
		             "[%zu, %zu): %llu chunks decoded", off, end,
		             (unsigned long long)(cache_decodes(st) - d0));
		ulp_version_info b = current(st, dst);
		cr_assert_eq(b.ref, a.id);
		cr_assert_lt(b.stored, 8192, "stored %llu",
		             (unsigned long long)b.stored);
		memset(want, 0, off);
		memcpy(want + off, data + off, end - off);
		expect_content(st, dst, want, end);
		expect_version(st, b.id, want, end);
	}
	expect_reopened(st, dst, want, len);
	free(want);
	free(data);
}

/* A copy in parts whose ends are not chunk boundaries (as callers and
 * the 4 GiB of a FUSE reply make): each call copies up to the last
 * boundary by reference, the next continues from there, and the whole is
 * the source's version again, nothing decoded. */
Test(copyrange, in_parts_by_reference)
{
	const size_t chunk = ULP_CHUNK_SIZE_DEFAULT;
	ulp_store *st = open_default();
	size_t len = 5 * chunk + 4321;
	ulp_version_info a;
	uint64_t dst;
	ulp_file *f;
	uint8_t *data = src_and_dst(st, len, 37, &a, &dst, &f);

	uint64_t d0 = cache_decodes(st);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 0, 0, 2 * chunk + 5),
	             (ssize_t)(2 * chunk));
	/* Not where the copy stopped: bytes. */
	cr_assert_eq(
		ulp_file_copy_version(f, a.id, 3 * chunk, 3 * chunk, chunk), 0);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 2 * chunk, 2 * chunk,
	                                   chunk + 7),
	             (ssize_t)chunk);
	cr_assert_eq(ulp_file_copy_version(f, a.id, 3 * chunk, 3 * chunk,
	                                   SIZE_MAX),
	             (ssize_t)(len - 3 * chunk));
	ulp_file_release(f);
	sync_ok(st);
	cr_assert_eq(cache_decodes(st), d0, "%llu chunks decoded",
	             (unsigned long long)(cache_decodes(st) - d0));
	ulp_version_info b = current(st, dst);
	cr_assert_eq(b.ref, a.id);
	cr_assert_lt(b.stored, 4096, "stored %llu",
	             (unsigned long long)b.stored);
	cr_assert(memcmp(b.hash, a.hash, 16) == 0, "not the source's hash");
	expect_reopened(st, dst, data, len);
	free(data);
}
