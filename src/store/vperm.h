/*
 * vperm.h - who may read a version (vperm.c): the owner, group, mode and
 * POSIX access ACL a file had when each of its versions was committed,
 * and who could reach its path then, as read-only views of them.
 *
 * A version is exactly as private as its file was: its entry under
 * .ulpfs/versions/ shows what was recorded at commit, write bits cleared.
 * Who could search every directory above one of the file's names is
 * recorded too, so that a path later reopened cannot widen it: the
 * classes (owner, group, others) by the directories' modes and ACLs, and
 * each user that a directory's ACL names, on their own.  The view then
 * takes the bits of the classes that could not reach away, and carries an
 * ACL entry for each named user (their rights, or none).  Versions
 * committed before the store recorded this (schema 7 and older) show the
 * current file's attributes, or the root's owner with 0400 where there is
 * no file.
 */
#ifndef ULP_STORE_VPERM_H
#define ULP_STORE_VPERM_H

#include "store/store_core.h"

/* Classes that could reach a path: its owner, its group, the others. */
#define ULP_REACH_USER 4u
#define ULP_REACH_GROUP 2u
#define ULP_REACH_OTHER 1u
#define ULP_REACH_ALL 7u

/* Users named by the directories' ACLs that are recorded one by one;
 * past that many, the group and the others count as not reaching. */
#define ULP_VPERM_USERS_MAX 32

typedef struct ulp_vperm_user {
	uint32_t uid;
	uint32_t ok; /* 1: searches every directory above some name */
} ulp_vperm_user;

typedef struct ulp_vperm_reach {
	unsigned classes; /* ULP_REACH_* */
	size_t n;
	ulp_vperm_user users[ULP_VPERM_USERS_MAX];
} ulp_vperm_reach;

/* Record, in the row of version vid, the attributes of inode row (its
 * owner, group, mode, access ACL) and who could reach it.  mu held, in
 * the commit's transaction.  0 or -errno. */
int ulp_vperm_record(ulp_store *st, uint64_t vid, const ulp_cat_inode *row);

/* Who can search every directory above one of ino's names (the file owned
 * by uid:gid), by their modes and ACLs, taken strictly: a class counts
 * only where every member of it surely can.  mu held.  0 or -errno. */
int ulp_vperm_reach_of(ulp_store *st, uint64_t ino, uid_t uid, gid_t gid,
                       ulp_vperm_reach *out);

/* The read-only view of a file's perm bits and access ACL (acl NULL: it
 * has none) for those reach says could get to it: *mode its permission
 * bits, *view a malloc()ed ACL (NULL: none needed).  0 or -errno. */
int ulp_vperm_view(uint32_t perm, uid_t owner, const uint8_t *acl, size_t len,
                   const ulp_vperm_reach *reach, uint32_t *mode, uint8_t **view,
                   size_t *view_len);

/* reach as stored in a version row (classes in the reach column, the users
 * in reach_users) and back. */
void ulp_vperm_users_pack(const ulp_vperm_reach *r, uint8_t *buf);
void ulp_vperm_users_unpack(const void *buf, size_t len, ulp_vperm_reach *r);

#endif /* ULP_STORE_VPERM_H */
