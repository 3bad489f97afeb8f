/*
 * acl.c - a new inode inherits its directory's default POSIX ACL, as
 * posix_acl_create() does on Linux's local filesystems: a directory gets
 * it as its own default ACL, every new inode but a symlink gets it as its
 * access ACL, masked by the mode asked for (which it masks in turn).
 *
 * With FUSE_POSIX_ACL the kernel leaves the mode bits to the daemon: an
 * access ACL set gives the mode its permission bits (and is not kept when
 * they say it all), a chmod rewrites the ACL's owner, mask and other
 * entries, as posix_acl_update_mode() and posix_acl_chmod() do.
 *
 * The ACLs are in the kernel's xattr form (acl_form.h); the kernel
 * validated them when they were set.
 */
#include "store/store_core.h"

#include "store/acl_form.h"
#include "store/ns_internal.h"

/* posix_acl_create_masq(): acl (n entries, changed in place) and *mode
 * mask each other.  1 when the ACL says more than the mode bits can. */
static int create_masq(uint8_t *acl, size_t n, uint32_t *mode)
{
	uint32_t m = *mode;
	uint8_t *group_obj = NULL, *mask_obj = NULL;
	int not_equiv = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t *e = acl + ULP_ACL_HDR + i * ULP_ACL_ENT;
		unsigned perm = ulp_acl_get16(e + 2);
		switch (ulp_acl_get16(e)) {
		case ULP_ACL_USER_OBJ:
			perm &= (m >> 6) & 7;
			m &= (perm << 6) | ~0700u;
			break;
		case ULP_ACL_USER:
		case ULP_ACL_GROUP:
			not_equiv = 1;
			break;
		case ULP_ACL_GROUP_OBJ:
			group_obj = e;
			break;
		case ULP_ACL_OTHER:
			perm &= m & 7;
			m &= perm | ~07u;
			break;
		case ULP_ACL_MASK:
			mask_obj = e;
			not_equiv = 1;
			break;
		}
		ulp_acl_put16(e + 2, perm);
	}
	uint8_t *g = mask_obj ? mask_obj : group_obj;
	if (g) {
		unsigned perm = ulp_acl_get16(g + 2) & ((m >> 3) & 7);
		ulp_acl_put16(g + 2, perm);
		m &= (perm << 3) | ~070u;
	}
	*mode = (*mode & ~0777u) | (m & 0777u);
	return not_equiv;
}

/* posix_acl_equiv_mode(): the permission bits an access ACL stands for;
 * 1 when it says more than they can (named entries, a mask). */
static int equiv_mode(const uint8_t *acl, size_t n, uint32_t *mode)
{
	uint32_t m = 0, g = 0, mask = 0;
	int not_equiv = 0, have_mask = 0;

	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = acl + ULP_ACL_HDR + i * ULP_ACL_ENT;
		unsigned perm = ulp_acl_get16(e + 2) & 7;
		switch (ulp_acl_get16(e)) {
		case ULP_ACL_USER_OBJ:
			m |= perm << 6;
			break;
		case ULP_ACL_GROUP_OBJ:
			g = perm << 3;
			break;
		case ULP_ACL_OTHER:
			m |= perm;
			break;
		case ULP_ACL_MASK:
			mask = perm << 3;
			have_mask = 1;
			not_equiv = 1;
			break;
		default:
			not_equiv = 1;
			break;
		}
	}
	*mode = m | (have_mask ? mask : g);
	return not_equiv;
}

int ulp_acl_access_set(ulp_store *st, ulp_cat_inode *row, const void *acl,
                       size_t len, int *store_it)
{
	static const char Q_MODE[] = "UPDATE inodes SET mode = ? WHERE ino = ?";
	uint32_t m;
	size_t n;
	int rc = ulp_acl_count(len, &n);

	if (rc < 0)
		return rc;
	*store_it = equiv_mode(acl, n, &m);
	row->mode = (row->mode & ~0777u) | m;
	return ulp_cat_exec(st->cat, Q_MODE, "iu", (int64_t)row->mode,
	                    row->ino);
}

int ulp_acl_chmod(ulp_store *st, uint64_t ino, uint32_t mode)
{
	static const char Q_PUT[] = "UPDATE xattrs SET value = ? WHERE ino = ? "
				    "AND name = '" ULP_ACL_ACCESS "'";
	uint8_t *acl;
	size_t len, n;
	int rc = ulp_cat_xattr(st->cat, ino, ULP_ACL_ACCESS, &acl, &len);

	if (rc < 0 || !acl || ulp_acl_count(len, &n) < 0) {
		free(acl);
		return rc;
	}
	/* posix_acl_chmod(): owner, mask (else group) and other follow. */
	uint8_t *group_obj = NULL, *mask_obj = NULL;
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = acl + ULP_ACL_HDR + i * ULP_ACL_ENT;
		switch (ulp_acl_get16(e)) {
		case ULP_ACL_USER_OBJ:
			ulp_acl_put16(e + 2, (mode >> 6) & 7);
			break;
		case ULP_ACL_GROUP_OBJ:
			group_obj = e;
			break;
		case ULP_ACL_MASK:
			mask_obj = e;
			break;
		case ULP_ACL_OTHER:
			ulp_acl_put16(e + 2, mode & 7);
			break;
		}
	}
	uint8_t *g = mask_obj ? mask_obj : group_obj;
	if (g)
		ulp_acl_put16(g + 2, (mode >> 3) & 7);
	rc = ulp_cat_exec(st->cat, Q_PUT, "bu", acl, len, ino);
	free(acl);
	return rc;
}

static int put_xattr(ulp_store *st, uint64_t ino, const char *name,
                     const void *v, size_t n)
{
	static const char Q[] = "INSERT OR REPLACE INTO xattrs(ino, name, "
				"value) VALUES(?, ?, ?)";

	return ulp_cat_exec(st->cat, Q, "usb", ino, name, v, n);
}

int ulp_acl_inherit(ulp_store *st, uint64_t parent, ulp_cat_inode *row)
{
	static const char Q_MODE[] = "UPDATE inodes SET mode = ? WHERE ino = ?";
	uint8_t *acl;
	size_t len;
	int rc;

	if (row->kind == ULP_KIND_SYMLINK)
		return 0;
	rc = ulp_cat_xattr(st->cat, parent, ULP_ACL_DEFAULT, &acl, &len);
	if (rc < 0 || !acl)
		return rc;
	size_t n;
	if (ulp_acl_count(len, &n) < 0) {
		free(acl); /* not an ACL the kernel set: nothing inherited */
		return 0;
	}
	if (row->kind == ULP_KIND_DIR)
		rc = put_xattr(st, row->ino, ULP_ACL_DEFAULT, acl, len);
	if (rc == 0 && create_masq(acl, n, &row->mode))
		rc = put_xattr(st, row->ino, ULP_ACL_ACCESS, acl, len);
	if (rc == 0)
		rc = ulp_cat_exec(st->cat, Q_MODE, "iu", (int64_t)row->mode,
		                  row->ino);
	free(acl);
	return rc;
}

int ulp_acl_default_of(ulp_store *st, uint64_t dir)
{
	static const char Q[] = "SELECT 1 FROM xattrs WHERE ino = ? AND name = "
				"'" ULP_ACL_DEFAULT "'";
	int64_t v;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = ulp_cat_int(st->cat, &v, Q, "u", dir);
	pthread_mutex_unlock(&st->mu);
	return rc;
}
