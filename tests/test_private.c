/*
 * test_private.c - a version is as private as its file was (issue 36):
 * owner, group, mode and ACL recorded at commit and shown read-only; the
 * classes that could not reach the path lose their bits; versions of older
 * stores show the current file's attributes; the store directory is
 * private to its user whatever the umask, and a looser one is tightened.
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
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "store/store.h"

#include "test_store_util.h"

TestSuite(private, .init = setup, .fini = teardown);

/* Run one statement on the catalog of a closed store. */
static void sql(const char *q)
{
	char db[400];
	sqlite3 *h;
	char *err = NULL;
	snprintf(db, sizeof db, "%s/catalog.db", store_dir());
	cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(h, q, NULL, NULL, &err), SQLITE_OK, "%s: %s",
	             q, err ? err : "");
	sqlite3_close(h);
}

static ulp_version_perm perm_of(ulp_store *st, uint64_t vid)
{
	ulp_version_perm p;
	int rc = ulp_version_perm_get(st, vid, &p);
	cr_assert_eq(rc, 0, "perm: %s", strerror(-rc));
	return p;
}

static void set_mode(ulp_store *st, uint64_t ino, mode_t mode)
{
	ulp_attr a = { .mode = mode }, out;
	cr_assert_eq(ulp_ns_setattr(st, ino, &a, ULP_SET_MODE, &out), 0);
}

static void set_owner(ulp_store *st, uint64_t ino, uid_t uid, gid_t gid)
{
	ulp_attr a = { .uid = uid, .gid = gid }, out;
	cr_assert_eq(ulp_ns_setattr(st, ino, &a, ULP_SET_UID | ULP_SET_GID,
	                            &out),
	             0);
}

/* The kernel's xattr form of an ACL: user::U user:UID:NAMED group::G
 * mask::M other::O (each a permission digit). */
static size_t acl_make(uint8_t *b, uint32_t uid, unsigned u, unsigned named,
                       unsigned g, unsigned m, unsigned o)
{
	const unsigned ent[5][3] = { { 0x01, u, 0xffffffffu },
		                     { 0x02, named, uid },
		                     { 0x04, g, 0xffffffffu },
		                     { 0x10, m, 0xffffffffu },
		                     { 0x20, o, 0xffffffffu } };
	b[0] = 2;
	b[1] = b[2] = b[3] = 0;
	for (int i = 0; i < 5; i++) {
		uint8_t *e = b + 4 + 8 * i;
		e[0] = (uint8_t)ent[i][0];
		e[1] = 0;
		e[2] = (uint8_t)ent[i][1];
		e[3] = 0;
		for (int k = 0; k < 4; k++)
			e[4 + k] = (uint8_t)(ent[i][2] >> (8 * k));
	}
	return 44;
}

/* user::rw- user:UID:NAMED group::r-- mask::r-- other::--- */
static size_t acl_named(uint8_t *b, uint32_t uid, unsigned named)
{
	return acl_make(b, uid, 6, named, 4, 4, 0);
}

Test(private, versions_keep_owner_group_and_mode_read_only)
{
	ulp_store *st = open_default();
	uint64_t ino = put_file(st, ULP_ROOT_INO, "f", "secret v1", 9);
	set_mode(st, ino, S_IFREG | 0600);
	sync_ok(st);
	uint64_t v1 = current(st, ino).id;

	set_mode(st, ino, S_IFREG | 0664);
	set_owner(st, ino, 1234, 5678);
	put_file(st, ULP_ROOT_INO, "f", "public v2", 9);
	sync_ok(st);
	uint64_t v2 = current(st, ino).id;
	cr_assert_neq(v1, v2);

	ulp_version_perm p = perm_of(st, v1);
	cr_assert_eq(p.uid, 0);
	cr_assert_eq(p.gid, 0);
	cr_assert_eq(p.mode, 0400, "0600 shown read-only: %o", p.mode);
	p = perm_of(st, v2);
	cr_assert_eq(p.uid, 1234, "the owner at its commit");
	cr_assert_eq(p.gid, 5678);
	cr_assert_eq(p.mode, 0444, "0664 loses its write bits: %o", p.mode);

	/* a later chmod of the file changes neither */
	set_mode(st, ino, S_IFREG | 0777);
	cr_assert_eq(perm_of(st, v1).mode, 0400);
	cr_assert_eq(perm_of(st, v2).mode, 0444);
	ulp_store_close(st);

	st = open_default(); /* recorded, not held in memory */
	cr_assert_eq(perm_of(st, v1).mode, 0400);
	cr_assert_eq(perm_of(st, v2).uid, 1234);
	ulp_store_close(st);
}

Test(private, a_private_directory_narrows_its_versions)
{
	ulp_store *st = open_default();
	uint64_t priv = mkdir_in(st, ULP_ROOT_INO, "priv");
	set_mode(st, priv, S_IFDIR | 0700);
	uint64_t g = put_file(st, priv, "g", "behind 0700", 11);
	sync_ok(st);
	uint64_t v1 = current(st, g).id;
	cr_assert_eq(perm_of(st, v1).mode, 0400,
	             "0644 behind a 0700 directory reads as its owner's only");

	/* the directory opened: later versions are the others' too, the
	 * first one stays as private as it was */
	set_mode(st, priv, S_IFDIR | 0755);
	put_file(st, priv, "g", "in the open", 11);
	sync_ok(st);
	uint64_t v2 = current(st, g).id;
	cr_assert_eq(perm_of(st, v2).mode, 0444);
	cr_assert_eq(perm_of(st, v1).mode, 0400);

	/* a group-only directory keeps the group's bits */
	uint64_t grp = mkdir_in(st, ULP_ROOT_INO, "grp");
	set_mode(st, grp, S_IFDIR | 0750);
	uint64_t h = put_file(st, grp, "h", "group", 5);
	sync_ok(st);
	cr_assert_eq(perm_of(st, current(st, h).id).mode, 0440);

	/* a directory whose owner is another user, searchable by others
	 * only: the file's owner counts as another too */
	uint64_t odd = mkdir_in(st, ULP_ROOT_INO, "odd");
	set_owner(st, odd, 42, 42);
	set_mode(st, odd, S_IFDIR | 0701);
	uint64_t k = put_file(st, odd, "k", "k", 1);
	sync_ok(st);
	cr_assert_eq(perm_of(st, current(st, k).id).mode, 040,
	             "g-x on the directory: neither the file's owner nor its "
	             "group surely reach it, nor all the others; the "
	             "directory's owner does, through a named entry (the "
	             "mask's bits)");
	uint8_t got[128];
	ssize_t n = ulp_version_acl_get(st, current(st, k).id, got, sizeof got);
	cr_assert_eq(n, 4 + 5 * 8,
	             "user::, user:42:, group::, mask::, other::");
	cr_assert_eq(got[12], 0x02);
	cr_assert_eq(got[12 + 2], 4, "user 42 reads, as it does live");
	cr_assert_eq(got[12 + 4], 42);
	cr_assert_eq(got[4 + 2], 0, "the file's owner does not");
	ulp_store_close(st);
}

Test(private, directory_acls_weigh_each_named_user)
{
	ulp_store *st = open_default();
	uint8_t acl[64], got[128];
	/* a 0700 directory that lets nobody (65534) in by its ACL */
	uint64_t d = mkdir_in(st, ULP_ROOT_INO, "adir");
	set_mode(st, d, S_IFDIR | 0700);
	size_t n = acl_make(acl, 65534, 7, 5, 0, 5, 0);
	cr_assert_eq(ulp_xattr_set(st, d, ULP_ACL_ACCESS, acl, n, 0), 0);
	uint64_t h = put_file(st, d, "h", "through the ACL", 15);
	sync_ok(st);
	uint64_t v = current(st, h).id;
	cr_assert_eq(perm_of(st, v).mode, 0440, "%o", perm_of(st, v).mode);
	ssize_t k = ulp_version_acl_get(st, v, got, sizeof got);
	cr_assert_eq(k, 4 + 5 * 8);
	cr_assert_eq(got[12], 0x02, "a named user entry");
	cr_assert_eq(got[12 + 2], 4, "nobody reads it, as live");
	cr_assert_eq(got[20], 0x04);
	cr_assert_eq(got[20 + 2], 0, "the group does not");
	cr_assert_eq(got[36 + 2], 0, "the others do not");

	/* an open directory that shuts nobody out: the others still reach */
	uint64_t e = mkdir_in(st, ULP_ROOT_INO, "deny");
	n = acl_make(acl, 65534, 7, 0, 5, 5, 5);
	cr_assert_eq(ulp_xattr_set(st, e, ULP_ACL_ACCESS, acl, n, 0), 0);
	uint64_t f = put_file(st, e, "f", "not for nobody", 14);
	sync_ok(st);
	v = current(st, f).id;
	k = ulp_version_acl_get(st, v, got, sizeof got);
	cr_assert_eq(k, 4 + 5 * 8);
	cr_assert_eq(got[12 + 2], 0, "nobody is refused, as live");
	cr_assert_eq(got[36 + 2], 4, "the others read, as live");
	ulp_store_close(st);
}

Test(private, hard_links_reach_through_any_name)
{
	ulp_store *st = open_default();
	uint64_t open_d = mkdir_in(st, ULP_ROOT_INO, "open");
	uint64_t closed = mkdir_in(st, ULP_ROOT_INO, "closed");
	set_mode(st, closed, S_IFDIR | 0700);
	uint64_t f = put_file(st, closed, "f", "linked", 6);
	sync_ok(st);
	cr_assert_eq(perm_of(st, current(st, f).id).mode, 0400);
	ulp_attr a;
	cr_assert_eq(ulp_ns_link(st, f, open_d, "f", &a), 0);
	put_file(st, closed, "f", "linked 2", 8);
	sync_ok(st);
	cr_assert_eq(perm_of(st, current(st, f).id).mode, 0444,
	             "the open directory's name lets others reach it");
	ulp_store_close(st);
}

Test(private, acls_are_recorded_and_made_read_only)
{
	ulp_store *st = open_default();
	uint8_t acl[64], got[64];
	size_t n = acl_named(acl, 65534, 6);
	uint64_t ino = put_file(st, ULP_ROOT_INO, "a", "acl", 3);
	cr_assert_eq(ulp_xattr_set(st, ino, ULP_ACL_ACCESS, acl, n, 0), 0);
	put_file(st, ULP_ROOT_INO, "a", "acl 2", 5);
	sync_ok(st);
	uint64_t v = current(st, ino).id;
	cr_assert_eq(ulp_version_acl_get(st, v, NULL, 0), (ssize_t)n);
	cr_assert_eq(ulp_version_acl_get(st, v, got, 8), -ERANGE);
	cr_assert_eq(ulp_version_acl_get(st, v, got, sizeof got), (ssize_t)n);
	cr_assert_eq(got[4 + 2], 4, "user:: loses w");
	cr_assert_eq(got[12 + 2], 4, "the named user loses w, keeps r");
	cr_assert_eq(memcmp(got + 12 + 4, acl + 12 + 4, 4), 0, "same uid");

	/* removing the ACL later leaves the version's */
	cr_assert_eq(ulp_xattr_remove(st, ino, ULP_ACL_ACCESS), 0);
	cr_assert_eq(ulp_version_acl_get(st, v, got, sizeof got), (ssize_t)n);

	/* a file without one: none */
	uint64_t b = put_file(st, ULP_ROOT_INO, "b", "b", 1);
	sync_ok(st);
	cr_assert_eq(ulp_version_acl_get(st, current(st, b).id, NULL, 0),
	             -ENODATA);

	/* behind a 0700 directory the named user loses it all */
	uint64_t d = mkdir_in(st, ULP_ROOT_INO, "d");
	set_mode(st, d, S_IFDIR | 0700);
	uint64_t c = put_file(st, d, "c", "c", 1);
	cr_assert_eq(ulp_xattr_set(st, c, ULP_ACL_ACCESS, acl, n, 0), 0);
	put_file(st, d, "c", "c2", 2);
	sync_ok(st);
	cr_assert_eq(ulp_version_acl_get(st, current(st, c).id, got,
	                                 sizeof got),
	             (ssize_t)n);
	cr_assert_eq(got[12 + 2], 0, "named entry: no reach, no rights");
	cr_assert_eq(got[36 + 2], 0, "other: none");

	/* a live directory's ACL, read-only */
	cr_assert_eq(ulp_xattr_set(st, d, ULP_ACL_ACCESS, acl, n, 0), 0);
	cr_assert_eq(ulp_xattr_acl_readonly(st, d, got, sizeof got),
	             (ssize_t)n);
	cr_assert_eq(got[12 + 2], 4);
	cr_assert_eq(ulp_xattr_acl_readonly(st, ULP_ROOT_INO, NULL, 0),
	             -ENODATA);
	ulp_store_close(st);
}

Test(private, older_versions_show_the_current_file)
{
	ulp_store *st = open_default();
	uint64_t ino = put_file(st, ULP_ROOT_INO, "old", "old", 3);
	sync_ok(st);
	uint64_t v = current(st, ino).id;
	uint64_t gone = put_file(st, ULP_ROOT_INO, "gone", "gone", 4);
	sync_ok(st);
	uint64_t vg = current(st, gone).id;
	cr_assert_eq(ulp_snapshot_create(st, "keep", NULL, 0, NULL), 0);
	cr_assert_eq(ulp_ns_unlink(st, ULP_ROOT_INO, "gone"), 0);
	set_mode(st, ino, S_IFREG | 0640);
	set_owner(st, ino, 7, 8);
	ulp_store_close(st);

	/* as a store of schema 7 left them */
	sql("UPDATE versions SET uid = NULL, gid = NULL, perm = NULL, "
	    "reach = NULL, acl = NULL");
	st = open_default();
	ulp_version_perm p = perm_of(st, v);
	cr_assert_eq(p.uid, 7, "the current file's owner");
	cr_assert_eq(p.gid, 8);
	cr_assert_eq(p.mode, 0440, "its mode, read-only: %o", p.mode);
	p = perm_of(st, vg);
	cr_assert_eq(p.mode, 0400, "no file: the root's owner alone");
	ulp_store_close(st);
}

/* Modes of path (relative to the store) and whether it exists. */
static mode_t mode_of(const char *rel)
{
	char p[512];
	struct stat sb;
	snprintf(p, sizeof p, "%s%s%s", store_dir(), *rel ? "/" : "", rel);
	cr_assert_eq(lstat(p, &sb), 0, "%s: %s", p, strerror(errno));
	return sb.st_mode & 07777;
}

static void expect_private(const char *when)
{
	const char *dirs[] = { "", "objects", "staging" };
	const char *files[] = { "catalog.db", "catalog.db-wal", "lock",
		                "reserve" };
	for (size_t i = 0; i < 3; i++)
		cr_assert_eq(mode_of(dirs[i]), 0700, "%s: %s/ is %o", when,
		             dirs[i], mode_of(dirs[i]));
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(mode_of(files[i]), 0600, "%s: %s is %o", when,
		             files[i], mode_of(files[i]));
	DIR *d;
	char p[512];
	snprintf(p, sizeof p, "%s/objects", store_dir());
	cr_assert((d = opendir(p)));
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			char rel[300];
			snprintf(rel, sizeof rel, "objects/%s", e->d_name);
			cr_assert_eq(mode_of(rel), 0600, "%s: %s is %o", when,
			             rel, mode_of(rel));
			n++;
		}
	closedir(d);
	cr_assert_gt(n, 0, "objects were written");
}

Test(private, the_store_is_private_whatever_the_umask)
{
	mode_t old = umask(022);
	ulp_store *st = open_default();
	put_file(st, ULP_ROOT_INO, "x", "xx", 2);
	sync_ok(st);
	expect_private("umask 022, while open");
	ulp_store_close(st);
	umask(077);
	st = open_default();
	ulp_store_close(st);
	umask(old);
	cr_assert_eq(mode_of(""), 0700);
}

Test(private, a_loose_store_is_tightened_on_open)
{
	ulp_store *st = open_default();
	put_file(st, ULP_ROOT_INO, "x", "xx", 2);
	sync_ok(st);
	ulp_store_close(st);
	/* as ulpfs before this change left one under umask 022 */
	char p[512];
	const char *loosen[] = { "", "objects", "staging" };
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "%s/%s", store_dir(), loosen[i]);
		cr_assert_eq(chmod(p, 0755), 0);
	}
	const char *files[] = { "catalog.db", "lock" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s/%s", store_dir(), files[i]);
		cr_assert_eq(chmod(p, 0644), 0);
	}
	snprintf(p, sizeof p, "%s/objects", store_dir());
	DIR *d = opendir(p);
	cr_assert(d);
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			char f[800];
			snprintf(f, sizeof f, "%s/%s", p, e->d_name);
			cr_assert_eq(chmod(f, 0644), 0);
		}
	closedir(d);
	st = open_default();
	expect_private("reopened after loosening");
	ulp_store_close(st);
}
