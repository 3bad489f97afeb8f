/*
 * side.c - choosing the side of a version: the version of a sibling file
 * of the same checkpoint that some of its tensors are coded given (see
 * side.h for who may be a user or a provider).
 *
 * Candidates are the live versions of the providers in the version's
 * directory, closest in commit time first: for a new version those just
 * committed beside it, for a flip (an older version coded again, against
 * its successor) those committed with it.  A candidate is kept only if
 * ulp_side_match_find matches some tensor, which verifies sampled
 * elements: a side from another checkpoint does not pass, and a wrong one
 * could only cost ratio, never bytes.
 */
#include "store/side.h"
#include "store/reader.h"
#include "store/versions.h"

/* The suffix of a provider's name, as SQL compares it too. */
#define PROVIDER_SUFFIX ".safetensors"
#define MAX_CANDIDATES 4

static int is_provider(const char *path)
{
	size_t n = strlen(path), k = sizeof(PROVIDER_SUFFIX) - 1;
	return n >= k && strcmp(path + n - k, PROVIDER_SUFFIX) == 0;
}

int ulp_side_wants(const char *path, const ulp_tensor_map *map)
{
	if (is_provider(path) || !map)
		return 0;
	for (size_t i = 0; i < map->n; i++)
		if (map->v[i].dtype == ULP_DT_F32)
			return 1;
	return 0;
}

int ulp_side_mem_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	const ulp_side_mem *m = opaque;
	if (off > m->size || len > m->size - off)
		return ULP_ERR_IO;
	memcpy(buf, m->p + off, len);
	return ULP_OK;
}

/* path's directory ("" for the root) in a malloc()ed string. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return strndup(path, slash ? (size_t)(slash - path) : 0);
}

static const char Q_PENDING[] = "SELECT 1 FROM dirents AS d"
				" JOIN inodes AS i ON i.ino = d.ino"
				" WHERE d.parent = ? AND i.staged <> 0"
				" AND substr(d.name, -12) = '" PROVIDER_SUFFIX
				"' LIMIT 1";

int ulp_side_pending(ulp_store *st, const char *path)
{
	ULP_MU_HELD(st);
	uint64_t parent;
	int64_t one;
	char *dir = dir_of(path);
	if (!dir)
		return -ENOMEM;
	int rc = ulp_ns_resolve(st, dir, &parent);
	free(dir);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	rc = ulp_cat_int(st->cat, &one, Q_PENDING, "u", parent);
	return rc < 0 ? rc : rc > 0;
}

/* Live provider versions in the directory dir, closest in commit time to
 * created first. */
static const char Q_CANDIDATES[] =
	"SELECT id FROM versions WHERE state = 0 AND layout <> 0"
	" AND substr(path, -12) = '" PROVIDER_SUFFIX "'"
	" AND ((?1 = '' AND instr(path, '/') = 0)"
	"  OR (?1 <> '' AND path >= ?2 AND path < ?3"
	"   AND instr(substr(path, ?4), '/') = 0))"
	" ORDER BY abs(created - ?5), id DESC LIMIT 4";

static int candidates(ulp_store *st, const char *path, int64_t created,
                      uint64_t *ids, size_t *n)
{
	char *dir = dir_of(path), *lo = NULL, *hi = NULL;
	int rc = dir ? ulp_path_range(dir, &lo, &hi) : -ENOMEM;

	*n = 0;
	if (rc == 0) {
		pthread_mutex_lock(&st->mu);
		sqlite3_stmt *s = ulp_cat_q(st->cat, Q_CANDIDATES, "sssii", dir,
		                            lo, hi, (int64_t)strlen(lo) + 1,
		                            created);
		while ((rc = ulp_cat_step(st->cat, s)) == 1)
			if (*n < MAX_CANDIDATES)
				ids[(*n)++] =
					(uint64_t)sqlite3_column_int64(s, 0);
		pthread_mutex_unlock(&st->mu);
	}
	free(dir);
	free(lo);
	free(hi);
	return rc;
}

/* Match cur with live version vid: 0 (out->v.id set when something
 * matched) or -errno. */
static int match_one(ulp_store *st, uint64_t vid, const ulp_tensor_map *cur_map,
                     ulp_ref_read_fn cur_read, void *cur_opaque,
                     ulp_side_pick *out)
{
	ulp_tensor_map smap = { ULP_FMT_UNKNOWN, 0, NULL };
	ulp_version_info v;

	pthread_mutex_lock(&st->mu);
	int rc = ulp_version_get_locked(st, vid, &v);
	if (rc == 0 && v.state != ULP_VERSION_LIVE)
		rc = -ENOENT;
	if (rc == 0)
		rc = ulp_version_tmap_locked(st, vid, &smap);
	pthread_mutex_unlock(&st->mu);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	/* The side's bytes through the reader, as a reference's. */
	ulp_ref_ctx sctx = { st, vid, 0, NULL };
	rc = ulp_errno_of(ulp_side_match_find(cur_map, cur_read, cur_opaque,
	                                      &smap, ulp_ref_read, &sctx,
	                                      &out->map));
	ulp_tensor_map_free(&smap);
	if (rc == 0 && out->map.n)
		out->v = v;
	return rc;
}

int ulp_side_find(ulp_store *st, const char *path, int64_t created_ns,
                  const ulp_tensor_map *cur_map, ulp_ref_read_fn cur_read,
                  void *cur_opaque, ulp_side_pick *out)
{
	uint64_t ids[MAX_CANDIDATES];
	size_t n;

	memset(out, 0, sizeof *out);
	int rc = candidates(st, path, created_ns, ids, &n);
	for (size_t i = 0; rc == 0 && i < n && !out->v.id; i++)
		rc = match_one(st, ids[i], cur_map, cur_read, cur_opaque, out);
	if (rc < 0)
		ulp_side_pick_free(out);
	return rc;
}

int ulp_side_load(ulp_store *st, uint64_t side, const ulp_tensor_map *cur_map,
                  ulp_ref_read_fn cur_read, void *cur_opaque,
                  ulp_side_pick *out)
{
	memset(out, 0, sizeof *out);
	int rc = match_one(st, side, cur_map, cur_read, cur_opaque, out);
	if (rc < 0)
		ulp_side_pick_free(out);
	return rc;
}

void ulp_side_pick_free(ulp_side_pick *p)
{
	ulp_side_map_free(&p->map);
	memset(&p->v, 0, sizeof p->v);
}
