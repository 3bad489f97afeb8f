/*
 * catalog.c - the SQLite connection: open, schema and migrations, the
 * prepared-statement cache, transactions, bind helpers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "store/catalog.h"

typedef struct stmt_slot {
	const char *sql;
	sqlite3_stmt *st;
} stmt_slot;

struct ulp_catalog {
	sqlite3 *db;
	stmt_slot *slots; /* open addressing on the address of sql */
	size_t nslots, used;
	int err; /* error of the last failed ulp_cat_q() */
};

int ulp_cat_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_TOOBIG:
		return -E2BIG;
	default: /* IOERR, CORRUPT, NOTADB, PROTOCOL, ... */
		return -EIO;
	}
}

/* ------------------------------------------------------- the schema */

/* Version 1.  Times are nanoseconds since the epoch; hashes are content
 * hashes in canonical form (of the kind the version's object has: the
 * tree hash from object format 3, the XXH3-128 before); object names are
 * 32 hex digits; versions.state is 0 live, 1 ghost (deleted, still
 * referenced), 2 deleted (object gone). */
static const char SCHEMA_V1[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
	"CREATE TABLE inodes("
	" ino INTEGER PRIMARY KEY AUTOINCREMENT,"
	" kind INTEGER NOT NULL,"
	" mode INTEGER NOT NULL,"
	" uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL,"
	" nlink INTEGER NOT NULL,"
	" size INTEGER NOT NULL DEFAULT 0,"
	" atime INTEGER NOT NULL,"
	" mtime INTEGER NOT NULL,"
	" ctime INTEGER NOT NULL,"
	" target TEXT,"
	" version INTEGER,"
	" staged INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX inodes_version ON inodes(version)"
	" WHERE version IS NOT NULL;"
	"CREATE INDEX inodes_staged ON inodes(staged) WHERE staged <> 0;"
	"CREATE TABLE dirents("
	" id INTEGER PRIMARY KEY,"
	" parent INTEGER NOT NULL,"
	" name TEXT NOT NULL,"
	" ino INTEGER NOT NULL UNIQUE,"
	" UNIQUE(parent, name));"
	"CREATE TABLE versions("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" ino INTEGER NOT NULL,"
	" path TEXT NOT NULL,"
	" seq INTEGER NOT NULL,"
	" size INTEGER NOT NULL,"
	" mtime INTEGER NOT NULL,"
	" hash BLOB NOT NULL,"
	" object TEXT NOT NULL,"
	" ref INTEGER,"
	" depth INTEGER NOT NULL,"
	" keyframe INTEGER NOT NULL,"
	" stored INTEGER NOT NULL,"
	" state INTEGER NOT NULL DEFAULT 0,"
	" layout INTEGER NOT NULL DEFAULT 0,"
	" tmap BLOB,"
	" created INTEGER NOT NULL,"
	" UNIQUE(path, seq));"
	"CREATE INDEX versions_ref ON versions(ref) WHERE ref IS NOT NULL;"
	"CREATE INDEX versions_layout ON versions(layout, id)"
	" WHERE state = 0;"
	"CREATE INDEX versions_object ON versions(object);"
	"CREATE INDEX versions_ghosts ON versions(state) WHERE state = 1;"
	"CREATE TABLE snapshots("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" name TEXT NOT NULL UNIQUE,"
	" created INTEGER NOT NULL);"
	"CREATE TABLE snapshot_items("
	" snapshot INTEGER NOT NULL REFERENCES snapshots(id)"
	"  ON DELETE CASCADE,"
	" path TEXT NOT NULL,"
	" version INTEGER NOT NULL,"
	" PRIMARY KEY(snapshot, path)) WITHOUT ROWID;"
	"CREATE INDEX snapshot_items_version ON snapshot_items(version);";

typedef struct migration {
	const char *sql; /* run first (may be NULL) */
	int (*fn)(ulp_catalog *c, uid_t uid,
	          gid_t gid); /* then (may be NULL) */
} migration;

static int v1_root(ulp_catalog *c, uid_t uid, gid_t gid)
{
	struct timespec ts;
	int64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	return ulp_cat_exec(c,
	                    "INSERT INTO inodes(ino, kind, mode, uid, gid,"
	                    " nlink, size, atime, mtime, ctime)"
	                    " VALUES(1, ?, ?, ?, ?, 2, 0, ?, ?, ?)",
	                    "ddiiiii", ULP_KIND_DIR, (int)(S_IFDIR | 0755),
	                    (int64_t)uid, (int64_t)gid, now, now, now);
}

/* Version 2: the encoder's statistics of each version (ulp_stats, as
 * written by ulp_estats_encode: logical and stored bytes per dtype, chunks
 * per codec path), so that `ulpfs stats` can break the store down without
 * decoding anything; NULL for versions committed before.  Snapshot items
 * are also found by version and by path prefix. */
static const char SCHEMA_V2[] = "ALTER TABLE versions ADD COLUMN estats BLOB;"
				"CREATE INDEX IF NOT EXISTS versions_path_state"
				" ON versions(path, state, seq);";

/* Version 3: figures of other compressors on a version's bytes (name
 * "zstd-19": the size `zstd -19 FILE` gives), so that `ulpfs stats
 * --zstd19` compresses each version once.  Versions are immutable (a
 * rebase changes the object, not the content), so a row never goes stale;
 * it is deleted with the version's object.  No foreign key: the version
 * row outlives its object. */
static const char SCHEMA_V3[] = "CREATE TABLE baselines("
				" version INTEGER NOT NULL,"
				" name TEXT NOT NULL,"
				" bytes INTEGER NOT NULL,"
				" PRIMARY KEY(version, name)) WITHOUT ROWID;";

/* Version 4: reverse-delta chains.  versions.flip names the version a
 * version is to be re-encoded against in the background (its successor,
 * now stored standalone; 0: standalone itself, which is how a forward
 * chain of an older store starts its conversion); NULL: nothing pending.
 * Rows of older stores keep their forward references, which read as
 * before (see gc.c for how they are converted). */
static const char SCHEMA_V4[] = "ALTER TABLE versions ADD COLUMN flip INTEGER;"
				"CREATE INDEX versions_flip ON versions(id)"
				" WHERE flip IS NOT NULL;";

/* Version 5, "local filesystem" (issue 13): what a local POSIX filesystem
 * keeps beside names and contents.
 * - inodes.rdev: the device number of a character or block special file
 *   (FIFOs and sockets keep 0); kind 4 is a special file.
 * - xattrs: extended attributes by inode and full name ("user.x",
 *   "system.posix_acl_access"), removed with their inode by a trigger, so
 *   that every path that deletes an inode row drops them in its own
 *   transaction.
 * - dirents.ino is no longer UNIQUE: hard links give an inode several
 *   entries.  SQLite cannot drop a constraint, so the table is rebuilt
 *   (ids kept: they are readdir offsets). */
static const char SCHEMA_V5_LOCALFS[] =
	"ALTER TABLE inodes ADD COLUMN rdev INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE xattrs("
	" ino INTEGER NOT NULL,"
	" name TEXT NOT NULL,"
	" value BLOB NOT NULL,"
	" PRIMARY KEY(ino, name)) WITHOUT ROWID;"
	"CREATE TRIGGER inodes_drop_xattrs AFTER DELETE ON inodes"
	" BEGIN DELETE FROM xattrs WHERE ino = old.ino; END;"
	"CREATE TABLE dirents_v5("
	" id INTEGER PRIMARY KEY,"
	" parent INTEGER NOT NULL,"
	" name TEXT NOT NULL,"
	" ino INTEGER NOT NULL,"
	" UNIQUE(parent, name));"
	"INSERT INTO dirents_v5(id, parent, name, ino)"
	" SELECT id, parent, name, ino FROM dirents;"
	"DROP TABLE dirents;"
	"ALTER TABLE dirents_v5 RENAME TO dirents;"
	"CREATE INDEX dirents_ino ON dirents(ino, id);";

/* Version 6: snapshots keep whole inodes, not only the versions of files
 * (issue 13).  snapshot_nodes: every entry below a pinned path, with the
 * attributes its inode had (ino: its number then, shared by hard links;
 * nlink: the names it has within the snapshot; version: a regular file's
 * pinned version, also in snapshot_items, which keeps it alive);
 * snapshot_xattrs: the extended attributes (ACLs included) of those
 * inodes.  Snapshots taken before have no rows here: their files and
 * directories are shown as before (version files below directories that
 * the paths imply). */
static const char SCHEMA_V6_SNAPNODES[] =
	"CREATE TABLE snapshot_nodes("
	" snapshot INTEGER NOT NULL REFERENCES snapshots(id)"
	"  ON DELETE CASCADE,"
	" path TEXT NOT NULL,"
	" ino INTEGER NOT NULL,"
	" kind INTEGER NOT NULL,"
	" mode INTEGER NOT NULL,"
	" uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL,"
	" rdev INTEGER NOT NULL,"
	" nlink INTEGER NOT NULL,"
	" size INTEGER NOT NULL,"
	" atime INTEGER NOT NULL,"
	" mtime INTEGER NOT NULL,"
	" ctime INTEGER NOT NULL,"
	" target TEXT,"
	" version INTEGER,"
	" PRIMARY KEY(snapshot, path)) WITHOUT ROWID;"
	"CREATE INDEX snapshot_nodes_ino ON snapshot_nodes(snapshot, ino);"
	"CREATE TABLE snapshot_xattrs("
	" snapshot INTEGER NOT NULL REFERENCES snapshots(id)"
	"  ON DELETE CASCADE,"
	" ino INTEGER NOT NULL,"
	" name TEXT NOT NULL,"
	" value BLOB NOT NULL,"
	" PRIMARY KEY(snapshot, ino, name)) WITHOUT ROWID;";

/* Version 7: contexts from another file of the checkpoint (issue 12).
 * versions.side names the version of another file (the sibling
 * model.safetensors of an optimizer.pt) that the version's object is
 * coded given, besides its reference; NULL: none.  A version named as a
 * side stays (a ghost, once deleted) until its dependants are coded
 * without it, as a reference does.  Older ulpfs refuse the catalog, so
 * none of them can delete a side still needed. */
static const char SCHEMA_V7_SIDES[] = "ALTER TABLE versions ADD COLUMN side "
				      "INTEGER;"
				      "CREATE INDEX versions_side ON "
				      "versions(side) WHERE side IS NOT NULL;";

/* Version 8: a version is as private as its file was (issue 36).  The
 * owner, group, permission bits (perm) and POSIX access ACL of the file
 * when the version was committed, and who could search every directory
 * above one of its names then (vperm.h): reach, the classes, and
 * reach_users, the users weighed one by one.  NULL in rows
 * of older stores, which show the current file's attributes instead. */
static const char SCHEMA_V8_PERMS[] = "ALTER TABLE versions ADD COLUMN uid "
				      "INTEGER;"
				      "ALTER TABLE versions ADD COLUMN gid "
				      "INTEGER;"
				      "ALTER TABLE versions ADD COLUMN perm "
				      "INTEGER;"
				      "ALTER TABLE versions ADD COLUMN reach "
				      "INTEGER;"
				      "ALTER TABLE versions ADD COLUMN "
				      "reach_users BLOB;"
				      "ALTER TABLE versions ADD COLUMN acl "
				      "BLOB;";

/* Version 9: the newest version of a file may be a plain file (issue 30):
 * plain = 1 when its object names the plain bytes themselves, the writer's
 * staging file linked into objects/, not an encoded container.  A flip
 * codes it (as a reverse delta or a standalone object) and clears it. */
static const char SCHEMA_V9_PLAIN[] = "ALTER TABLE versions ADD COLUMN plain "
				      "INTEGER NOT NULL DEFAULT 0;";

/* Version 10: each version's bucket representation (bucket_reps.h says
 * what a row means).  A bucket store created the table itself before, so
 * a catalog may have it already. */
static const char SCHEMA_V10_BUCKET_REPS[] =
	"CREATE TABLE IF NOT EXISTS bucket_reps("
	" version INTEGER PRIMARY KEY,"
	" object TEXT NOT NULL,"
	" base INTEGER,"
	" side INTEGER,"
	" depth INTEGER NOT NULL,"
	" stored INTEGER NOT NULL,"
	" state INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS bucket_reps_object ON bucket_reps(object);"
	"CREATE INDEX IF NOT EXISTS bucket_reps_base ON bucket_reps(base)"
	" WHERE base IS NOT NULL;";

/* migrations[i] brings a catalog from version i to i + 1 (0: empty). */
static const migration migrations[ULP_CAT_SCHEMA_VERSION] = {
	{ SCHEMA_V1, v1_root },      { SCHEMA_V2, NULL },
	{ SCHEMA_V3, NULL },         { SCHEMA_V4, NULL },
	{ SCHEMA_V5_LOCALFS, NULL }, { SCHEMA_V6_SNAPNODES, NULL },
	{ SCHEMA_V7_SIDES, NULL },   { SCHEMA_V8_PERMS, NULL },
	{ SCHEMA_V9_PLAIN, NULL },   { SCHEMA_V10_BUCKET_REPS, NULL },
};

static int read_version(ulp_catalog *c, int *version)
{
	int64_t v = 0, n = 0;
	int rc;

	rc = ulp_cat_int(c, &n,
	                 "SELECT count(*) FROM sqlite_master"
	                 " WHERE name = 'meta' AND type = 'table'",
	                 "");
	if (rc < 0)
		return rc;
	if (n == 0) {
		rc = ulp_cat_int(c, &n, "SELECT count(*) FROM sqlite_master",
		                 "");
		if (rc < 0)
			return rc;
		if (n != 0)
			return -EPROTO; /* some other SQLite database */
		*version = 0;
		return 0;
	}
	rc = ulp_cat_int(c, &v,
	                 "SELECT value FROM meta WHERE key = 'schema_version'",
	                 "");
	if (rc < 0)
		return rc;
	if (rc == 0 || v < 1)
		return -EPROTO;
	*version = (int)v;
	return 0;
}

static int migrate(ulp_catalog *c, uid_t uid, gid_t gid)
{
	int version, rc;

	rc = read_version(c, &version);
	if (rc < 0)
		return rc;
	if (version > ULP_CAT_SCHEMA_VERSION)
		return -EPROTO; /* written by a newer ulpfs */
	while (version < ULP_CAT_SCHEMA_VERSION) {
		const migration *m = &migrations[version];

		rc = ulp_cat_begin(c);
		if (rc < 0)
			return rc;
		if (m->sql) {
			char *msg = NULL;
			int src = sqlite3_exec(c->db, m->sql, NULL, NULL, &msg);

			sqlite3_free(msg);
			rc = ulp_cat_errno(src);
			if (src != SQLITE_OK && rc == 0)
				rc = -EIO;
		}
		if (!rc && m->fn)
			rc = m->fn(c, uid, gid);
		if (!rc)
			rc = ulp_cat_exec(c,
			                  "INSERT OR REPLACE INTO meta(key, "
			                  "value)"
			                  " VALUES('schema_version', ?)",
			                  "d", version + 1);
		if (!rc)
			rc = ulp_cat_commit(c);
		if (rc < 0) {
			ulp_cat_rollback(c);
			return rc;
		}
		version++;
	}
	return 0;
}

int ulp_cat_schema_version(ulp_catalog *c)
{
	int v = 0;

	return read_version(c, &v) < 0 ? -1 : v;
}

static int quick_check(ulp_catalog *c)
{
	sqlite3_stmt *s = NULL;
	int rc, ok = 0;

	if (sqlite3_prepare_v2(c->db, "PRAGMA quick_check", -1, &s, NULL) !=
	    SQLITE_OK)
		return ulp_cat_errno(sqlite3_errcode(c->db));
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(s, 0);
		ok = t && strcmp((const char *)t, "ok") == 0;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return ulp_cat_errno(rc);
	return ok ? 0 : -EIO;
}

static int pragma(ulp_catalog *c, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);

	sqlite3_free(msg);
	return rc == SQLITE_OK     ? 0
	       : ulp_cat_errno(rc) ? ulp_cat_errno(rc)
	                           : -EIO;
}

/* A connection to the catalog at path (flags: sqlite3_open_v2's). */
static int cat_connect(const char *path, int flags, ulp_catalog **out)
{
	ulp_catalog *c = calloc(1, sizeof *c);
	int rc;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->nslots = 128;
	c->slots = calloc(c->nslots, sizeof *c->slots);
	if (!c->slots) {
		free(c);
		return -ENOMEM;
	}
	rc = sqlite3_open_v2(path, &c->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		rc = c->db ? ulp_cat_errno(sqlite3_errcode(c->db)) : -ENOMEM;
		ulp_cat_close(c);
		return rc ? rc : -EIO;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, 10000);
	*out = c;
	return 0;
}

int ulp_cat_attach(const char *path, int readonly, ulp_catalog **out)
{
	return cat_connect(
		path, readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE,
		out);
}

int ulp_cat_open(const char *path, uid_t root_uid, gid_t root_gid,
                 ulp_catalog **out)
{
	ulp_catalog *c = NULL;
	int rc = cat_connect(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
	                     &c);

	*out = NULL;
	if (rc)
		return rc;
	/* journal_mode answers with a row; exec ignores it. */
	rc = pragma(c, "PRAGMA journal_mode=WAL");
	if (!rc)
		rc = pragma(c, "PRAGMA synchronous=FULL");
	if (!rc)
		rc = pragma(c, "PRAGMA foreign_keys=ON");
	if (!rc)
		rc = quick_check(c);
	if (!rc)
		rc = migrate(c, root_uid, root_gid);
	if (rc)
		goto fail;
	*out = c;
	return 0;
fail:
	ulp_cat_close(c);
	return rc ? rc : -EIO;
}

void ulp_cat_close(ulp_catalog *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].st)
			sqlite3_finalize(c->slots[i].st);
	free(c->slots);
	if (c->db)
		sqlite3_close(c->db);
	free(c);
}

int ulp_cat_script(ulp_catalog *c, const char *sql)
{
	return pragma(c, sql);
}

const char *ulp_cat_errmsg(ulp_catalog *c)
{
	return c && c->db ? sqlite3_errmsg(c->db) : "out of memory";
}

int ulp_cat_vacuum_into(ulp_catalog *c, const char *out)
{
	char *sql = sqlite3_mprintf("VACUUM INTO %Q", out);
	int rc = sql ? pragma(c, sql) : -ENOMEM;

	sqlite3_free(sql);
	return rc;
}

/* ------------------------------------------------------ transactions */

static int simple(ulp_catalog *c, const char *sql)
{
	sqlite3_stmt *s = ulp_cat_q(c, sql, "");
	int rc = ulp_cat_step(c, s);

	if (rc == 1) {
		ulp_cat_done(s);
		rc = 0;
	}
	return rc;
}

int ulp_cat_begin(ulp_catalog *c)
{
	return simple(c, "BEGIN IMMEDIATE");
}

int ulp_cat_commit(ulp_catalog *c)
{
	int rc = simple(c, "COMMIT");

	/* A failed COMMIT may leave the transaction open. */
	if (rc < 0 && !sqlite3_get_autocommit(c->db))
		ulp_cat_rollback(c);
	return rc;
}

void ulp_cat_rollback(ulp_catalog *c)
{
	if (!sqlite3_get_autocommit(c->db))
		(void)simple(c, "ROLLBACK");
}

/* ------------------------------------------------------ statements */

static size_t slot_of(const ulp_catalog *c, const char *sql)
{
	uintptr_t h = (uintptr_t)sql;

	h ^= h >> 17;
	h *= 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 7) & (c->nslots - 1);
}

static int grow_slots(ulp_catalog *c)
{
	size_t n = c->nslots * 2;
	stmt_slot *old = c->slots, *nw = calloc(n, sizeof *nw);

	if (!nw)
		return -ENOMEM;
	size_t on = c->nslots;
	c->slots = nw;
	c->nslots = n;
	for (size_t i = 0; i < on; i++) {
		if (!old[i].sql)
			continue;
		size_t j = slot_of(c, old[i].sql);
		while (nw[j].sql)
			j = (j + 1) & (n - 1);
		nw[j] = old[i];
	}
	free(old);
	return 0;
}

static sqlite3_stmt *prepared(ulp_catalog *c, const char *sql)
{
	size_t i = slot_of(c, sql);

	while (c->slots[i].sql) {
		if (c->slots[i].sql == sql)
			return c->slots[i].st;
		i = (i + 1) & (c->nslots - 1);
	}
	if ((c->used + 1) * 2 > c->nslots) {
		int rc = grow_slots(c);
		if (rc < 0) {
			c->err = rc;
			return NULL;
		}
		return prepared(c, sql);
	}
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
	                            &s, NULL);
	if (rc != SQLITE_OK) {
		c->err = ulp_cat_errno(rc);
		if (!c->err)
			c->err = -EIO;
		return NULL;
	}
	c->slots[i].sql = sql;
	c->slots[i].st = s;
	c->used++;
	return s;
}

static sqlite3_stmt *vbind(ulp_catalog *c, const char *sql, const char *fmt,
                           va_list ap)
{
	sqlite3_stmt *s = prepared(c, sql);
	int rc = SQLITE_OK, k = 1;

	if (!s)
		return NULL;
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	for (const char *f = fmt; *f && rc == SQLITE_OK; f++, k++) {
		switch (*f) {
		case 'i':
			rc = sqlite3_bind_int64(s, k, va_arg(ap, int64_t));
			break;
		case 'u':
			rc = sqlite3_bind_int64(
				s, k, (sqlite3_int64)va_arg(ap, uint64_t));
			break;
		case 'r': {
			uint64_t v = va_arg(ap, uint64_t);
			rc = v ? sqlite3_bind_int64(s, k, (sqlite3_int64)v)
			       : sqlite3_bind_null(s, k);
			break;
		}
		case 'd':
			rc = sqlite3_bind_int(s, k, va_arg(ap, int));
			break;
		case 's': {
			const char *t = va_arg(ap, const char *);
			rc = t ? sqlite3_bind_text(s, k, t, -1, SQLITE_STATIC)
			       : sqlite3_bind_null(s, k);
			break;
		}
		case 'b': {
			const void *p = va_arg(ap, const void *);
			size_t n = va_arg(ap, size_t);
			rc = p ? sqlite3_bind_blob64(s, k, p, n, SQLITE_STATIC)
			       : sqlite3_bind_null(s, k);
			break;
		}
		default:
			rc = SQLITE_MISUSE;
		}
	}
	if (rc != SQLITE_OK) {
		c->err = ulp_cat_errno(rc) ? ulp_cat_errno(rc) : -EINVAL;
		return NULL;
	}
	return s;
}

sqlite3_stmt *ulp_cat_q(ulp_catalog *c, const char *sql, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sqlite3_stmt *s = vbind(c, sql, fmt, ap);
	va_end(ap);
	return s;
}

int ulp_cat_step(ulp_catalog *c, sqlite3_stmt *s)
{
	int rc;

	if (!s)
		return c->err ? c->err : -EIO;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		return 1;
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	rc = ulp_cat_errno(rc);
	return rc ? rc : -EIO;
}

void ulp_cat_done(sqlite3_stmt *s)
{
	if (s)
		sqlite3_reset(s);
}

int ulp_cat_exec(ulp_catalog *c, const char *sql, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	sqlite3_stmt *s = vbind(c, sql, fmt, ap);
	va_end(ap);
	while ((rc = ulp_cat_step(c, s)) == 1)
		;
	return rc;
}

int ulp_cat_int(ulp_catalog *c, int64_t *out, const char *sql, const char *fmt,
                ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	sqlite3_stmt *s = vbind(c, sql, fmt, ap);
	va_end(ap);
	rc = ulp_cat_step(c, s);
	if (rc == 1) {
		if (sqlite3_column_type(s, 0) == SQLITE_NULL) {
			rc = 0;
		} else {
			*out = sqlite3_column_int64(s, 0);
		}
		ulp_cat_done(s);
	}
	return rc;
}

int64_t ulp_cat_col_int(ulp_cat_stmt *s, int col)
{
	return sqlite3_column_int64(s, col);
}

const char *ulp_cat_col_text(ulp_cat_stmt *s, int col)
{
	const char *t = (const char *)sqlite3_column_text(s, col);

	return t ? t : "";
}

int64_t ulp_cat_last_rowid(ulp_catalog *c)
{
	return sqlite3_last_insert_rowid(c->db);
}

int ulp_cat_changes(ulp_catalog *c)
{
	return sqlite3_changes(c->db);
}

/* ------------------------------------------------------ object lists */

int ulp_obj_list_add(ulp_obj_list *l, uint64_t vid, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct ulp_obj_item *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].vid = vid;
	snprintf(l->v[l->n].name, sizeof l->v[l->n].name, "%s", name);
	l->n++;
	return 0;
}

void ulp_obj_list_free(ulp_obj_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}
