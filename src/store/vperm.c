/*
 * vperm.c - who may read a version: recorded at commit, shown read-only
 * (vperm.h).
 */
#include "store/vperm.h"
#include "store/acl_form.h"

/* ------------------------------------------------------------ reach */

/* One directory above a name: its owner, group, mode and access ACL. */
typedef struct anc {
	uint32_t uid, gid, mode;
	uint8_t *acl; /* NULL: none (or not a valid ACL: then nobody) */
	size_t nent;
	int bad;
} anc;

/* The directories from dir up to the root, into a malloc()ed vector. */
static int chain_load(ulp_store *st, uint64_t dir, anc **out, size_t *n)
{
	size_t cap = 0;
	int rc = 0;
	*out = NULL;
	*n = 0;
	for (;;) {
		ulp_cat_inode d;
		size_t len;
		if (*n == cap) {
			anc *v = cap < 4096
			                 ? realloc(*out, (cap + 16) * sizeof *v)
			                 : NULL;
			if (!v)
				return cap < 4096 ? -ENOMEM : -ELOOP;
			*out = v;
			cap += 16;
		}
		anc *a = &(*out)[*n];
		memset(a, 0, sizeof *a);
		rc = ulp_cat_inode_get(st->cat, dir, &d);
		if (rc == 0)
			rc = ulp_cat_xattr(st->cat, dir, ULP_ACL_ACCESS,
			                   &a->acl, &len);
		if (rc < 0)
			return rc;
		(*n)++;
		a->uid = d.uid;
		a->gid = d.gid;
		a->mode = d.mode;
		a->bad = a->acl && ulp_acl_count(len, &a->nent) < 0;
		if (dir == ULP_ROOT_INO)
			return 0;
		rc = ulp_cat_entry_of(st->cat, dir, &dir, NULL);
		if (rc < 0)
			return rc; /* -ENOENT: detached, reached by no one */
	}
}

static void chain_free(anc *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].acl);
	free(v);
}

static const uint8_t *ent(const anc *a, size_t i)
{
	return a->acl + ULP_ACL_HDR + i * ULP_ACL_ENT;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int k = 0; k < 4; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

/* The qualifier (uid or gid) of an entry. */
static uint32_t ent_id(const uint8_t *e)
{
	return le32(e + 4);
}

/* Whether every group-class entry of a (owning group, named groups, mask)
 * searches: the bits a user in its group class surely gets. */
static int group_x(const anc *a)
{
	int x = !!(a->mode & S_IXGRP);
	for (size_t i = 0; a->acl && i < a->nent; i++) {
		unsigned tag = ulp_acl_get16(ent(a, i));
		if ((tag == ULP_ACL_GROUP_OBJ || tag == ULP_ACL_GROUP ||
		     tag == ULP_ACL_MASK) &&
		    !(ulp_acl_get16(ent(a, i) + 2) & 1))
			x = 0;
	}
	return x;
}

/* A user who is not a's owner and has no entry of their own there. */
static int anyone_x(const anc *a)
{
	return group_x(a) && (a->mode & S_IXOTH);
}

/* Whether user uid surely searches a, whatever their groups. */
static int user_x(const anc *a, uint32_t uid)
{
	if (a->bad)
		return 0;
	if (a->uid == uid)
		return !!(a->mode & S_IXUSR);
	int named = -1, mask = 1;
	for (size_t i = 0; a->acl && i < a->nent; i++) {
		const uint8_t *e = ent(a, i);
		unsigned tag = ulp_acl_get16(e), x = ulp_acl_get16(e + 2) & 1;
		if (tag == ULP_ACL_USER && ent_id(e) == uid)
			named = (int)x;
		else if (tag == ULP_ACL_MASK)
			mask = (int)x;
	}
	return named >= 0 ? named && mask : anyone_x(a);
}

/* The classes of a file owned by uid:gid that a lets through, for the
 * users who are neither its owner nor named by it (candidates, below). */
static unsigned anc_classes(const anc *a, uid_t uid, gid_t gid)
{
	unsigned r = 0;
	if (a->bad)
		return 0;
	if (user_x(a, uid))
		r |= ULP_REACH_USER;
	if (a->gid == gid ? group_x(a) : anyone_x(a))
		r |= ULP_REACH_GROUP;
	if (anyone_x(a))
		r |= ULP_REACH_OTHER;
	return r;
}

/* Users weighed one by one: the directories' owners and the users their
 * ACLs name (root aside, whom permissions do not stop).  0, or 1 when
 * there are more than fit. */
static int add_user(ulp_vperm_reach *r, uint32_t uid, uid_t owner)
{
	if (uid == 0 || uid == owner)
		return 0;
	for (size_t i = 0; i < r->n; i++)
		if (r->users[i].uid == uid)
			return 0;
	if (r->n == ULP_VPERM_USERS_MAX)
		return 1;
	r->users[r->n++] = (ulp_vperm_user){ .uid = uid, .ok = 0 };
	return 0;
}

static int candidates(const anc *v, size_t n, uid_t owner, ulp_vperm_reach *r)
{
	int over = 0;
	for (size_t k = 0; k < n; k++) {
		over |= add_user(r, v[k].uid, owner);
		for (size_t i = 0; v[k].acl && !v[k].bad && i < v[k].nent; i++)
			if (ulp_acl_get16(ent(&v[k], i)) == ULP_ACL_USER)
				over |= add_user(r, ent_id(ent(&v[k], i)),
				                 owner);
	}
	return over;
}

/* Weigh one chain: what it lets through adds to r. */
static void weigh(const anc *v, size_t n, uid_t uid, gid_t gid,
                  ulp_vperm_reach *r)
{
	unsigned c = ULP_REACH_ALL;
	for (size_t k = 0; k < n; k++)
		c &= anc_classes(&v[k], uid, gid);
	r->classes |= c;
	for (size_t i = 0; i < r->n; i++) {
		int ok = 1;
		for (size_t k = 0; k < n && ok; k++)
			ok = user_x(&v[k], r->users[i].uid);
		r->users[i].ok |= (uint32_t)ok;
	}
}

int ulp_vperm_reach_of(ulp_store *st, uint64_t ino, uid_t uid, gid_t gid,
                       ulp_vperm_reach *out)
{
	ULP_MU_HELD(st);
	static const char Q[] = "SELECT DISTINCT parent FROM dirents WHERE "
				"ino = ? LIMIT 16";
	struct {
		anc *v;
		size_t n;
	} ch[16];
	size_t nch = 0;
	int rc, over = 0;

	memset(out, 0, sizeof *out);
	sqlite3_stmt *s = ulp_cat_q(st->cat, Q, "u", ino);
	uint64_t parents[16];
	size_t np = 0;
	while ((rc = ulp_cat_step(st->cat, s)) == 1)
		parents[np++] = (uint64_t)sqlite3_column_int64(s, 0);
	for (size_t i = 0; i < np && rc == 0; i++) {
		anc *v;
		size_t n;
		int r = chain_load(st, parents[i], &v, &n);
		if (r < 0) {
			chain_free(v, n);
			if (r != -ENOENT) /* a name being removed: nowhere */
				rc = r;
			continue;
		}
		ch[nch].v = v;
		ch[nch++].n = n;
		over |= candidates(v, n, uid, out);
	}
	for (size_t i = 0; i < nch; i++) {
		if (rc == 0)
			weigh(ch[i].v, ch[i].n, uid, gid, out);
		chain_free(ch[i].v, ch[i].n);
	}
	if (over) { /* users not weighed fall to the classes: none */
		out->classes &= ULP_REACH_USER;
		out->n = 0;
	}
	return rc;
}

/* ------------------------------------------------------------- views */

typedef struct acl_ent {
	unsigned tag, perm;
	uint32_t id;
} acl_ent;

static int ent_cmp(const void *a, const void *b)
{
	const acl_ent *x = a, *y = b;
	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The entries of acl (or, without one, those perm stands for), with
 * room for extra more: a malloc()ed vector. */
static int entries(uint32_t perm, const uint8_t *acl, size_t len, size_t extra,
                   acl_ent **out, size_t *n)
{
	size_t k = 3;
	if (acl && ulp_acl_count(len, &k) < 0)
		return -EINVAL;
	acl_ent *v = calloc(k + extra + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	if (!acl) {
		v[0] = (acl_ent){ ULP_ACL_USER_OBJ, (perm >> 6) & 7, ~0u };
		v[1] = (acl_ent){ ULP_ACL_GROUP_OBJ, (perm >> 3) & 7, ~0u };
		v[2] = (acl_ent){ ULP_ACL_OTHER, perm & 7, ~0u };
	}
	for (size_t i = 0; acl && i < k; i++) {
		const uint8_t *e = acl + ULP_ACL_HDR + i * ULP_ACL_ENT;
		v[i] = (acl_ent){ ulp_acl_get16(e), ulp_acl_get16(e + 2) & 7,
			          ent_id(e) };
	}
	*out = v;
	*n = k;
	return 0;
}

static acl_ent *find(acl_ent *v, size_t n, unsigned tag, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].tag == tag && (tag != ULP_ACL_USER || v[i].id == id))
			return &v[i];
	return NULL;
}

/* Each entry's rights as reach allows, write cleared; the users weighed
 * one by one get an entry of their own (their rights in the file, taken
 * as the least of its group's and others', or none). */
static void restrict_entries(acl_ent *v, size_t *n, uid_t owner,
                             const ulp_vperm_reach *r)
{
	unsigned c = r->classes;
	acl_ent *g = find(v, *n, ULP_ACL_GROUP_OBJ, 0);
	acl_ent *o = find(v, *n, ULP_ACL_OTHER, 0);
	unsigned least = (g ? g->perm : 0) & (o ? o->perm : 0) & 5;
	for (size_t i = 0; i < r->n; i++)
		if (r->users[i].uid != owner &&
		    !find(v, *n, ULP_ACL_USER, r->users[i].uid))
			v[(*n)++] = (acl_ent){ ULP_ACL_USER,
				               r->users[i].ok ? least : 0,
				               r->users[i].uid };
	for (size_t i = 0; i < *n; i++) {
		unsigned need = ULP_REACH_GROUP | ULP_REACH_OTHER;
		if (v[i].tag == ULP_ACL_USER_OBJ)
			need = ULP_REACH_USER;
		else if (v[i].tag == ULP_ACL_GROUP_OBJ)
			need = ULP_REACH_GROUP;
		else if (v[i].tag == ULP_ACL_OTHER)
			need = ULP_REACH_OTHER;
		else if (v[i].tag == ULP_ACL_MASK)
			need = 0;
		if (v[i].tag == ULP_ACL_USER)
			for (size_t k = 0; k < r->n; k++)
				if (r->users[k].uid == v[i].id)
					need = r->users[k].ok ? 0 : 8;
		v[i].perm = (c & need) == need ? v[i].perm & 5 : 0;
	}
}

int ulp_vperm_view(uint32_t perm, uid_t owner, const uint8_t *acl, size_t len,
                   const ulp_vperm_reach *r, uint32_t *mode, uint8_t **view,
                   size_t *view_len)
{
	acl_ent *v;
	size_t n;
	*view = NULL;
	*view_len = 0;
	if (!acl && !r->n) { /* the mode bits say it all */
		*mode = perm & 0555;
		if (!(r->classes & ULP_REACH_USER))
			*mode &= ~0700u;
		if (!(r->classes & ULP_REACH_GROUP))
			*mode &= ~0070u;
		if (!(r->classes & ULP_REACH_OTHER))
			*mode &= ~0007u;
		return 0;
	}
	int rc = entries(perm, acl, len, r->n + 1, &v, &n);
	if (rc < 0)
		return rc;
	restrict_entries(v, &n, owner, r);
	acl_ent *mask = find(v, n, ULP_ACL_MASK, 0);
	int named = 0;
	unsigned group_class = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].tag == ULP_ACL_USER || v[i].tag == ULP_ACL_GROUP ||
		    v[i].tag == ULP_ACL_GROUP_OBJ) {
			named |= v[i].tag != ULP_ACL_GROUP_OBJ;
			group_class |= v[i].perm;
		}
	if (named && !mask) { /* as setfacl makes one */
		v[n] = (acl_ent){ ULP_ACL_MASK, group_class, ~0u };
		mask = &v[n++];
	}
	qsort(v, n, sizeof *v, ent_cmp);
	mask = find(v, n, ULP_ACL_MASK, 0);
	acl_ent *u = find(v, n, ULP_ACL_USER_OBJ, 0);
	acl_ent *g = mask ? mask : find(v, n, ULP_ACL_GROUP_OBJ, 0);
	acl_ent *o = find(v, n, ULP_ACL_OTHER, 0);
	*mode = (u ? u->perm << 6 : 0) | (g ? g->perm << 3 : 0) |
	        (o ? o->perm : 0);
	uint8_t *b = malloc(ULP_ACL_HDR + n * ULP_ACL_ENT);
	if (!b) {
		free(v);
		return -ENOMEM;
	}
	memset(b, 0, ULP_ACL_HDR);
	b[0] = 2; /* POSIX_ACL_XATTR_VERSION */
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = b + ULP_ACL_HDR + i * ULP_ACL_ENT;
		ulp_acl_put16(e, v[i].tag);
		ulp_acl_put16(e + 2, v[i].perm);
		put_le32(e + 4, v[i].id);
	}
	free(v);
	*view = b;
	*view_len = ULP_ACL_HDR + n * ULP_ACL_ENT;
	return 0;
}

/* ----------------------------------------------------------- records */

void ulp_vperm_users_pack(const ulp_vperm_reach *r, uint8_t *buf)
{
	for (size_t i = 0; i < r->n; i++) {
		put_le32(buf + 8 * i, r->users[i].uid);
		put_le32(buf + 8 * i + 4, r->users[i].ok);
	}
}

void ulp_vperm_users_unpack(const void *buf, size_t len, ulp_vperm_reach *r)
{
	const uint8_t *b = buf;
	r->n = 0;
	for (size_t i = 0; b && i + 8 <= len && r->n < ULP_VPERM_USERS_MAX;
	     i += 8) {
		r->users[r->n].uid = le32(b + i);
		r->users[r->n++].ok = le32(b + i + 4) ? 1 : 0;
	}
}

int ulp_vperm_record(ulp_store *st, uint64_t vid, const ulp_cat_inode *row)
{
	ULP_MU_HELD(st);
	static const char Q[] = "UPDATE versions SET uid = ?, gid = ?, "
				"perm = ?, reach = ?, reach_users = ?, "
				"acl = ? WHERE id = ?";
	uint8_t *acl, users[8 * ULP_VPERM_USERS_MAX];
	size_t len;
	ulp_vperm_reach r;
	int rc = ulp_vperm_reach_of(st, row->ino, row->uid, row->gid, &r);

	if (rc == 0)
		rc = ulp_cat_xattr(st->cat, row->ino, ULP_ACL_ACCESS, &acl,
		                   &len);
	if (rc < 0)
		return rc;
	ulp_vperm_users_pack(&r, users);
	rc = ulp_cat_exec(st->cat, Q, "iiiibbu", (int64_t)row->uid,
	                  (int64_t)row->gid, (int64_t)(row->mode & 07777),
	                  (int64_t)r.classes, r.n ? users : NULL, 8 * r.n, acl,
	                  len, vid);
	free(acl);
	return rc;
}
