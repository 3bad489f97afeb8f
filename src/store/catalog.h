/*
 * catalog.h - the store's SQLite catalog: schema, migrations, prepared
 * statements, transactions and the row helpers several modules share.
 *
 * One connection, used under ulp_store.mu.  Statements are prepared once,
 * on first use, and cached by the address of their SQL text, so every
 * module keeps its queries beside the code that runs them:
 *
 *   static const char Q_GET[] = "SELECT x FROM t WHERE id = ?";
 *   sqlite3_stmt *s = ulp_cat_q(cat, Q_GET, "u", id);
 *   while ((rc = ulp_cat_step(cat, s)) == 1) ... sqlite3_column_*(s, 0)
 *
 * ulp_cat_step() resets the statement when it returns 0 (done) or an
 * error; a caller that stops early calls ulp_cat_done().  A NULL statement
 * (a failed ulp_cat_q) makes ulp_cat_step() return that failure.
 */
#ifndef ULP_STORE_CATALOG_H
#define ULP_STORE_CATALOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

/* The schema this code writes; older catalogs are migrated on open, newer
 * ones refused (-EPROTO). */
#define ULP_CAT_SCHEMA_VERSION 9

/* Inode kinds (inodes.kind). */
enum {
	ULP_KIND_FILE = 1,
	ULP_KIND_DIR = 2,
	ULP_KIND_SYMLINK = 3,
	ULP_KIND_SPECIAL = 4, /* FIFO, socket, character or block device */
};

typedef struct ulp_catalog ulp_catalog;

/* Open (creating) the catalog at path: WAL, synchronous=FULL, schema
 * created or migrated, PRAGMA quick_check.  root_uid/root_gid own a new
 * root directory.  0 or -errno. */
int ulp_cat_open(const char *path, uid_t root_uid, gid_t root_gid,
                 ulp_catalog **out);
void ulp_cat_close(ulp_catalog *c);
int ulp_cat_schema_version(ulp_catalog *c);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK. */
int ulp_cat_begin(ulp_catalog *c);
int ulp_cat_commit(ulp_catalog *c);
void ulp_cat_rollback(ulp_catalog *c);

/* Prepare (cached), reset and bind.  fmt has one letter per parameter:
 *   'i' int64_t   'u' uint64_t   'd' int   'r' uint64_t, 0 binds NULL
 *   's' const char * (NUL-terminated; NULL binds NULL)
 *   'b' const void *, size_t (blob; NULL binds NULL)
 * Returns NULL on failure (ulp_cat_step then returns the error). */
sqlite3_stmt *ulp_cat_q(ulp_catalog *c, const char *sql, const char *fmt, ...);
/* 1: a row is ready; 0: done (reset); -errno (reset). */
int ulp_cat_step(ulp_catalog *c, sqlite3_stmt *s);
void ulp_cat_done(sqlite3_stmt *s);
/* Run a statement to completion: 0 or -errno. */
int ulp_cat_exec(ulp_catalog *c, const char *sql, const char *fmt, ...);
/* The first column of the first row as an integer: 1 (found), 0 (no row
 * or NULL) or -errno. */
int ulp_cat_int(ulp_catalog *c, int64_t *out, const char *sql, const char *fmt,
                ...);
int64_t ulp_cat_last_rowid(ulp_catalog *c);
int ulp_cat_changes(ulp_catalog *c);
/* An SQLite result code as a negative errno. */
int ulp_cat_errno(int sqlite_rc);

/* ------------------------------------------------------------ rows */

typedef struct ulp_cat_inode {
	uint64_t ino;
	int kind;
	uint32_t mode, uid, gid, nlink;
	uint64_t size;
	int64_t atime, mtime, ctime;
	uint64_t version; /* current committed version, 0: none */
	int staged;       /* content lives in staging/<ino> */
	uint64_t rdev;    /* device number of a special file */
} ulp_cat_inode;

int ulp_cat_inode_get(ulp_catalog *c, uint64_t ino, ulp_cat_inode *out);
/* Insert (in->ino ignored; the new number is stored there). */
int ulp_cat_inode_insert(ulp_catalog *c, ulp_cat_inode *in, const char *target);
/* Write every attribute field of a row (not version/staged). */
int ulp_cat_inode_update(ulp_catalog *c, const ulp_cat_inode *in);
int ulp_cat_inode_content(ulp_catalog *c, uint64_t ino, uint64_t version,
                          int staged, uint64_t size, int64_t mtime,
                          int64_t ctime);
int ulp_cat_inode_delete(ulp_catalog *c, uint64_t ino);
/* mtime = ctime = now (a directory whose entries changed). */
int ulp_cat_touch_dir(ulp_catalog *c, uint64_t ino, int64_t now,
                      int nlink_delta);

/* Directory entries. */
int ulp_cat_lookup(ulp_catalog *c, uint64_t parent, const char *name,
                   uint64_t *ino);
int ulp_cat_link(ulp_catalog *c, uint64_t parent, const char *name,
                 uint64_t ino);
int ulp_cat_unlink(ulp_catalog *c, uint64_t parent, const char *name);
/* The entry naming ino: 0, -ENOENT (none: root or unlinked). */
int ulp_cat_entry_of(ulp_catalog *c, uint64_t ino, uint64_t *parent,
                     char **name);
/* The value of ino's extended attribute name, malloc()ed into *val (NULL
 * when it has none): 0 or -errno. */
int ulp_cat_xattr(ulp_catalog *c, uint64_t ino, const char *name, uint8_t **val,
                  size_t *len);
/* 1 when directory ino has no entries, 0 when it has, -errno. */
int ulp_cat_dir_empty(ulp_catalog *c, uint64_t ino);

/* Object names scheduled for removal once a transaction has committed,
 * with the version each belonged to. */
typedef struct ulp_obj_list {
	struct ulp_obj_item {
		uint64_t vid;
		char name[33];
	} * v;
	size_t n, cap;
} ulp_obj_list;

int ulp_obj_list_add(ulp_obj_list *l, uint64_t vid, const char *name);
void ulp_obj_list_free(ulp_obj_list *l);

#endif /* ULP_STORE_CATALOG_H */
