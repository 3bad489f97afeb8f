/*
 * ctl_exec.c - the executor: one implementation of every store command,
 * run by the daemon for a request on its control socket or by the helper
 * itself on a store no daemon holds.  Requests are JSON objects (ctl.h);
 * paths in them are relative to the store's root ("a/b").  cli_exec()
 * dispatches them; the short operations are here, the long ones in
 * ctl_stats.c, ctl_verify.c and ctl_restore.c (ctl_ops.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_ops.h"

static void hex(const uint8_t h[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static const char *str(json_t *req, const char *key)
{
	const char *s = json_string_value(json_object_get(req, key));
	return s ? s : "";
}

static const char *state_name(int s)
{
	return s == ULP_VERSION_LIVE    ? "live"
	       : s == ULP_VERSION_GHOST ? "ghost"
	                                : "deleted";
}

static int fail(cli_env *env, const char *what, int rc)
{
	cli_errf(env, "%s: %s", what, strerror(-rc));
	return CLI_FAIL;
}

/* ------------------------------------------------------------ log */

/* {"path", "seq"} of a version another one names (null: none). */
static json_t *named_json(uint64_t id, const char *path, uint64_t seq)
{
	return id ? json_pack("{s:s,s:I}", "path", path, "seq", (json_int_t)seq)
	          : json_null();
}

static json_t *version_json(const ulp_version_info *v, const char *path,
                            const char *refpath, uint64_t refseq,
                            const char *sidepath, uint64_t sideseq)
{
	char h[33], t[32];
	hex(v->hash, h);
	cli_time(v->created_ns, t);
	json_t *ref = named_json(v->ref, refpath, refseq);
	json_t *side = named_json(v->side, sidepath, sideseq);
	return json_pack("{s:I,s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:f,s:o,s:o,s:i,"
	                 "s:b,s:b,s:s,s:s}",
	                 "seq", (json_int_t)v->seq, "path", path, "id",
	                 (json_int_t)v->id, "time", t, "created_ns",
	                 (json_int_t)v->created_ns, "mtime_ns",
	                 (json_int_t)v->mtime_ns, "size", (json_int_t)v->size,
	                 "stored", (json_int_t)v->stored, "ratio",
	                 v->stored ? (double)v->size / (double)v->stored : 0.0,
	                 "ref", ref, "side", side, "depth", (int)v->depth,
	                 "keyframe", v->keyframe, "plain", v->plain, "hash", h,
	                 "state", state_name(v->state));
}

/* REF comes last: a reference on another path ("dir/file@N") is as wide
 * as a path, so it would break any column after it. */
static int print_versions(cli_env *env, ulp_version_info *v, char **path,
                          size_t n, int json, int show_path)
{
	json_t *arr = json ? json_array() : NULL;
	int pw = 4;
	for (size_t i = 0; show_path && i < n; i++)
		if (strlen(path[i]) > (size_t)pw)
			pw = (int)strlen(path[i]) < 120 ? (int)strlen(path[i])
			                                : 120;
	if (!json)
		cli_outf(env,
		         "%5s  %-19s  %10s  %10s  %7s %5s %2s  %-32s  %-*s%s\n",
		         "N", "TIME", "SIZE", "STORED", "RATIO", "DEPTH", "KF",
		         "HASH", show_path ? pw : 0, show_path ? "PATH" : "",
		         show_path ? "  REF" : "REF");
	for (size_t i = 0; i < n; i++) {
		ulp_version_info r, sv;
		char *rpath = NULL, *spath = NULL, refs[64] = "-";
		if (v[i].ref &&
		    ulp_version_get_path(env->st, v[i].ref, &r, &rpath) == 0) {
			if (strcmp(rpath, path[i]) == 0)
				snprintf(refs, sizeof(refs), "%" PRIu64, r.seq);
			else
				snprintf(refs, sizeof(refs), "%s@%" PRIu64,
				         rpath, r.seq);
		}
		if (v[i].side &&
		    ulp_version_get_path(env->st, v[i].side, &sv, &spath) < 0)
			spath = NULL;
		if (json) {
			json_array_append_new(arr,
			                      version_json(&v[i], path[i],
			                                   rpath ? rpath : "",
			                                   rpath ? r.seq : 0,
			                                   spath ? spath : "",
			                                   spath ? sv.seq : 0));
		} else {
			char t[32], sz[32], so[32], h[33], ratio[16],
				sseq[24] = "";
			cli_time(v[i].created_ns, t);
			cli_human(v[i].size, sz);
			cli_human(v[i].stored, so);
			hex(v[i].hash, h);
			if (v[i].state == ULP_VERSION_DELETED)
				snprintf(ratio, sizeof(ratio), "-");
			else if (v[i].plain) /* a plain newest */
				snprintf(ratio, sizeof(ratio), "plain");
			else
				snprintf(ratio, sizeof(ratio), "%.2f",
				         v[i].stored
				                 ? (double)v[i].size /
				                           (double)v[i].stored
				                 : 0.0);
			if (spath)
				snprintf(sseq, sizeof(sseq), "@%" PRIu64,
				         sv.seq);
			cli_outf(env,
			         "%5" PRIu64 "  %-19s  %10s  %10s  %7s %5u %2s "
			         " "
			         "%s  %-*s%s%s%s%s%s%s%s%s\n",
			         v[i].seq, t, sz, so, ratio, v[i].depth,
			         v[i].keyframe ? "K" : "", h,
			         show_path ? pw : 0, show_path ? path[i] : "",
			         show_path ? "  " : "", refs,
			         spath ? "  side " : "", spath ? spath : "",
			         sseq, v[i].state ? "  (" : "",
			         v[i].state ? state_name(v[i].state) : "",
			         v[i].state ? ")" : "");
		}
		free(rpath);
		free(spath);
	}
	if (json) {
		char *s = json_dumps(arr, JSON_INDENT(2));
		if (s)
			cli_outf(env, "%s\n", s);
		free(s);
		json_decref(arr);
	}
	return CLI_OK;
}

int cli_op_log(cli_env *env, json_t *req)
{
	const char *path = str(req, "path");
	uint64_t seq = (uint64_t)json_integer_value(json_object_get(req, "se"
	                                                                 "q"));
	int json = json_is_true(json_object_get(req, "json"));
	cli_vvec a = { 0 };
	int rc, under = 0;

	if (json_is_true(json_object_get(req, "chain"))) {
		ulp_version_info v;
		char *p = NULL;
		rc = ulp_version_find(env->st, path, seq, &v);
		if (rc < 0) {
			cli_errf(env, "%s: no such version", path);
			return CLI_FAIL;
		}
		/* From the version back to its keyframe, across paths. */
		for (unsigned guard = 0; rc == 0 && guard < 100000; guard++) {
			rc = ulp_version_get_path(env->st, v.id, &v, &p);
			if (rc == 0)
				rc = cli_vvec_add(&a, &v, p);
			free(p);
			if (rc < 0 || !v.ref)
				break;
			uint64_t next = v.ref;
			v.id = next;
		}
		for (size_t i = 0; i < a.n / 2; i++) {
			ulp_version_info t = a.v[i];
			char *tp = a.path[i];
			a.v[i] = a.v[a.n - 1 - i];
			a.path[i] = a.path[a.n - 1 - i];
			a.v[a.n - 1 - i] = t;
			a.path[a.n - 1 - i] = tp;
		}
	} else {
		/* a path with no versions of its own may be a directory: then
		 * every file under it, each with its path */
		rc = *path ? ulp_version_list(env->st, path, cli_vvec_add, &a)
		           : 0;
		if (rc == 0 && a.n == 0) {
			rc = ulp_version_list_under(env->st, path, cli_vvec_add,
			                            &a);
			under = 1;
		}
		if (rc == 0 && a.n == 0) {
			cli_vvec_free(&a);
			cli_errf(env, "%s: no versions (no such file?)",
			         *path ? path : "/");
			return CLI_FAIL;
		}
	}
	if (rc < 0) {
		cli_vvec_free(&a);
		return fail(env, path, rc);
	}
	rc = print_versions(env, a.v, a.path, a.n, json,
	                    under || json_is_true(json_object_get(req, "chai"
	                                                               "n")));
	cli_vvec_free(&a);
	return rc;
}

/* ------------------------------------------------------------ snapshots */

typedef struct slist {
	cli_env *env;
	json_t *arr;
} slist;

static int snap_cb(void *opaque, const char *name, const ulp_snapshot_info *i)
{
	slist *l = opaque;
	char t[32], lb[32], sb[32];
	cli_time(i->created_ns, t);
	if (l->arr) {
		json_array_append_new(
			l->arr,
			json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "name", name,
		                  "time", t, "created_ns",
		                  (json_int_t)i->created_ns, "files",
		                  (json_int_t)i->items, "size",
		                  (json_int_t)i->logical_bytes, "stored",
		                  (json_int_t)i->stored_bytes));
		return 0;
	}
	cli_human(i->logical_bytes, lb);
	cli_human(i->stored_bytes, sb);
	cli_outf(l->env, "%-24s %-19s %8" PRIu64 " %12s %12s\n", name, t,
	         i->items, lb, sb);
	return 0;
}

static int item_cb(void *opaque, const char *path, const ulp_version_info *v)
{
	slist *l = opaque;
	char sz[32], h[33];
	hex(v->hash, h);
	if (l->arr) {
		json_array_append_new(
			l->arr,
			json_pack("{s:s,s:I,s:I,s:I,s:s}", "path", path, "seq",
		                  (json_int_t)v->seq, "id", (json_int_t)v->id,
		                  "size", (json_int_t)v->size, "hash", h));
		return 0;
	}
	cli_human(v->size, sz);
	cli_outf(l->env, "%-48s %6" PRIu64 " %12s  %s\n", path, v->seq, sz, h);
	return 0;
}

static void dump(cli_env *env, json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2));
	if (s)
		cli_outf(env, "%s\n", s);
	free(s);
	json_decref(j);
}

/* Whether path ("a/b") names an entry of the live tree. */
static int path_exists(ulp_store *st, const char *path)
{
	uint64_t dir = ULP_ROOT_INO;
	char *copy = strdup(path), *save = NULL;
	int ok = copy != NULL;
	for (char *c = copy ? strtok_r(copy, "/", &save) : NULL; c && ok;
	     c = strtok_r(NULL, "/", &save)) {
		ulp_attr a;
		ok = ulp_ns_lookup(st, dir, c, &a) == 0;
		if (ok)
			dir = a.ino;
	}
	free(copy);
	return ok;
}

int cli_op_snapshot(cli_env *env, const char *op, json_t *req)
{
	const char *name = str(req, "name");
	int json = json_is_true(json_object_get(req, "json"));
	slist l = { env, json ? json_array() : NULL };
	int rc;

	if (strcmp(op, "snap-create") == 0) {
		json_t *ps = json_object_get(req, "paths");
		size_t n = json_array_size(ps);
		const char **v = calloc(n ? n : 1, sizeof(*v));
		uint64_t items = 0;
		if (!v)
			return fail(env, name, -ENOMEM);
		for (size_t i = 0; i < n; i++)
			v[i] = json_string_value(json_array_get(ps, i)) ?: "";
		rc = cli_env_sync(env); /* pin what was closed so far */
		if (rc == 0)
			rc = ulp_snapshot_create(env->st, name, v, n, &items);
		if (rc == -ENOENT) {
			/* Name the subtree that is missing. */
			for (size_t i = 0; i < n; i++)
				if (!path_exists(env->st, v[i]))
					cli_errf(env,
					         "%s: no such file or "
					         "directory",
					         v[i]);
			free(v);
			return CLI_FAIL;
		}
		free(v);
		if (rc == -EEXIST) {
			cli_errf(env, "snapshot %s: already exists", name);
			return CLI_FAIL;
		}
		if (rc == -EINVAL) {
			cli_errf(env, "snapshot '%s': invalid name", name);
			return CLI_USAGE;
		}
		if (rc < 0)
			return fail(env, name, rc);
		cli_outf(env, "snapshot %s: %" PRIu64 " files pinned\n", name,
		         items);
		return CLI_OK;
	}
	if (strcmp(op, "snap-delete") == 0) {
		rc = ulp_snapshot_delete(env->st, name);
		if (rc == -ENOENT) {
			cli_errf(env, "snapshot %s: no such snapshot", name);
			return CLI_FAIL;
		}
		if (rc < 0)
			return fail(env, name, rc);
		ulp_fs_invalidate_snapshot(env->fs, name);
		return CLI_OK;
	}
	if (strcmp(op, "snap-list") == 0) {
		if (!json)
			cli_outf(env, "%-24s %-19s %8s %12s %12s\n", "NAME",
			         "CREATED", "FILES", "SIZE", "STORED");
		rc = ulp_snapshot_list(env->st, snap_cb, &l);
	} else {
		rc = ulp_snapshot_items(env->st, name, "", item_cb, &l);
		if (rc == -ENOENT) {
			json_decref(l.arr);
			cli_errf(env, "snapshot %s: no such snapshot", name);
			return CLI_FAIL;
		}
	}
	if (rc < 0) {
		json_decref(l.arr);
		return fail(env, name[0] ? name : "snapshots", rc);
	}
	if (json)
		dump(env, l.arr);
	return CLI_OK;
}

/* ------------------------------------------------------------ resolve */

/* The versions cat/export read: {"path", "seq"} or {"snapshot"}; answers
 * a JSON array of {path, id, seq, size, mtime_ns}. */
int cli_op_resolve(cli_env *env, json_t *req)
{
	const char *snap = json_string_value(json_object_get(req, "snapshot"));
	json_t *arr = json_array();
	int rc;

	if (!arr)
		return fail(env, "resolve", -ENOMEM);
	if (snap) {
		slist l = { env, json_array() };
		rc = ulp_snapshot_items(env->st, snap, "", item_cb, &l);
		if (rc < 0) {
			json_decref(l.arr);
			json_decref(arr);
			if (rc == -ENOENT) {
				cli_errf(env, "snapshot %s: no such snapshot",
				         snap);
				return CLI_FAIL;
			}
			return fail(env, snap, rc);
		}
		json_decref(arr);
		arr = l.arr;
		size_t i;
		json_t *it;
		json_array_foreach(arr, i, it)
		{
			ulp_version_info v;
			if (ulp_version_get(env->st,
			                    (uint64_t)json_integer_value(
						    json_object_get(it, "id")),
			                    &v) == 0)
				json_object_set_new(
					it, "mtime_ns",
					json_integer((json_int_t)v.mtime_ns));
		}
	} else {
		const char *path = str(req, "path");
		uint64_t seq =
			(uint64_t)json_integer_value(json_object_get(req, "se"
		                                                          "q"));
		ulp_version_info v;
		rc = ulp_version_find(env->st, path, seq, &v);
		if (rc < 0) {
			json_decref(arr);
			if (seq)
				cli_errf(env, "%s@%" PRIu64 ": no such version",
				         path, seq);
			else
				cli_errf(env, "%s: no such file or no version",
				         path);
			return CLI_FAIL;
		}
		json_array_append_new(
			arr,
			json_pack("{s:s,s:I,s:I,s:I,s:I}", "path", path, "id",
		                  (json_int_t)v.id, "seq", (json_int_t)v.seq,
		                  "size", (json_int_t)v.size, "mtime_ns",
		                  (json_int_t)v.mtime_ns));
	}
	char *s = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	if (!s)
		return fail(env, "resolve", -ENOMEM);
	cli_outf(env, "%s\n", s);
	free(s);
	return CLI_OK;
}

/* ------------------------------------------------------------ prune */

int cli_op_prune(cli_env *env, json_t *req)
{
	json_t *ps = json_object_get(req, "paths");
	unsigned keep_last =
		(unsigned)json_integer_value(json_object_get(req, "keep_last"));
	unsigned keep_every =
		(unsigned)json_integer_value(json_object_get(req, "keep_"
	                                                          "every"));
	int ret = CLI_OK;

	for (size_t i = 0; i < json_array_size(ps); i++) {
		const char *p = json_string_value(json_array_get(ps, i)) ?: "";
		uint64_t dropped = 0;
		int rc = ulp_version_prune(env->st, p, keep_last, keep_every,
		                           &dropped);
		if (rc == -ENOENT) {
			cli_errf(env, "%s: no such file (no versions)", p);
			ret = CLI_FAIL;
			continue;
		}
		if (rc < 0) {
			ret = fail(env, p, rc);
			continue;
		}
		cli_outf(env, "%s: %" PRIu64 " versions dropped\n", p, dropped);
	}
	return ret;
}

/* ------------------------------------------------------------ dispatch */

int cli_exec(cli_env *env, json_t *req)
{
	const char *op = str(req, "op");
	int rc;

	if (strcmp(op, "sync") == 0) {
		rc = cli_env_sync(env);
		return rc < 0 ? fail(env, "sync", rc) : CLI_OK;
	}
	if (strcmp(op, "gc") == 0) {
		rc = ulp_store_gc(env->st);
		return rc < 0 ? fail(env, "gc", rc) : CLI_OK;
	}
	if (strcmp(op, "log") == 0)
		return cli_op_log(env, req);
	if (strncmp(op, "snap-", 5) == 0)
		return cli_op_snapshot(env, op, req);
	if (strcmp(op, "resolve") == 0)
		return cli_op_resolve(env, req);
	if (strcmp(op, "restore") == 0)
		return cli_op_restore(env, req);
	if (strcmp(op, "stats") == 0)
		return cli_op_stats(env, req);
	if (strcmp(op, "verify") == 0)
		return cli_op_verify(env, req);
	if (strcmp(op, "prune") == 0)
		return cli_op_prune(env, req);
	cli_errf(env, "unknown request '%s'", op);
	return CLI_USAGE;
}
