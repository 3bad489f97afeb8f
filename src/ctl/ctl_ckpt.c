/*
 * ctl_ckpt.c - the figures of `ulpfs stats` per checkpoint (ctl_ops.h):
 * the versions grouped by directory and round, named, in the order they
 * were written.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_ops.h"

size_t cli_utf8_char(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len = s[0] < 0x80             ? 1
	             : (s[0] & 0xe0) == 0xc0 ? 2
	             : (s[0] & 0xf0) == 0xe0 ? 3
	             : (s[0] & 0xf8) == 0xf0 ? 4
	                                     : 0;
	static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (!len || len > n)
		return 0;
	uint32_t c = len == 1 ? s[0] : s[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* s[0..n) with every byte that is not part of valid UTF-8 as U+FFFD
 * (JSON strings must be UTF-8; paths are bytes).  NULL: out of memory. */
static char *utf8_clean(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		uint32_t c;
		size_t len = cli_utf8_char(s + i, n - i, &c);
		if (len) {
			memcpy(o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = 0;
	return out;
}

/* ------------------------------------------------------------ checkpoints */

typedef struct ck_group {
	const char *dir; /* the path of its first version; dirlen bytes */
	size_t dirlen;
	uint64_t seq, versions, logical, stored, z19;
	int64_t first_mtime;
	char *name;
} ck_group;

/* Length of the directory part of path ("a/b/c" -> 3, "c" -> 0). */
static size_t dir_len(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? (size_t)(s - path) : 0;
}

static int by_dir_seq(const void *a, const void *b, void *arg)
{
	const cli_vvec *vec = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const char *px = vec->path[x], *py = vec->path[y];
	size_t lx = dir_len(px), ly = dir_len(py);
	int c = memcmp(px, py, lx < ly ? lx : ly);
	if (c || lx != ly)
		return c ? c : lx < ly ? -1 : 1;
	if (vec->v[x].seq != vec->v[y].seq)
		return vec->v[x].seq < vec->v[y].seq ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int by_written(const void *a, const void *b)
{
	const ck_group *x = a, *y = b;
	if (x->first_mtime != y->first_mtime)
		return x->first_mtime < y->first_mtime ? -1 : 1;
	return strverscmp(x->name, y->name);
}

/* Group the sorted indexes idx[0..n) by (directory, seq). */
static size_t make_groups(const cli_vvec *vec, const size_t *idx, size_t n,
                          const uint64_t *z19, ck_group *g)
{
	size_t ng = 0;
	for (size_t k = 0; k < n; k++) {
		const ulp_version_info *v = &vec->v[idx[k]];
		const char *p = vec->path[idx[k]];
		size_t dl = dir_len(p);
		ck_group *cur = ng ? &g[ng - 1] : NULL;
		if (!cur || cur->dirlen != dl || memcmp(cur->dir, p, dl) ||
		    cur->seq != v->seq) {
			cur = &g[ng++];
			memset(cur, 0, sizeof(*cur));
			cur->dir = p;
			cur->dirlen = dl;
			cur->seq = v->seq;
			cur->first_mtime = v->mtime_ns;
		}
		cur->versions++;
		cur->logical += v->size;
		cur->stored += v->stored;
		cur->z19 += z19 ? z19[idx[k]] : 0;
		if (v->mtime_ns < cur->first_mtime)
			cur->first_mtime = v->mtime_ns;
	}
	return ng;
}

/* Name each group by its directory ("/" for the top), with "@seq" where
 * the directory has more than one round of versions. */
static int name_groups(ck_group *g, size_t ng)
{
	for (size_t i = 0; i < ng; i++) {
		int same_prev = i > 0 && g[i - 1].dirlen == g[i].dirlen &&
		                !memcmp(g[i - 1].dir, g[i].dir, g[i].dirlen);
		int same_next = i + 1 < ng && g[i + 1].dirlen == g[i].dirlen &&
		                !memcmp(g[i + 1].dir, g[i].dir, g[i].dirlen);
		char *d = g[i].dirlen ? utf8_clean(g[i].dir, g[i].dirlen)
		                      : strdup("/");
		int r = !d ? -1
		        : same_prev || same_next
		                ? asprintf(&g[i].name, "%s@%" PRIu64, d,
		                           g[i].seq)
		                : asprintf(&g[i].name, "%s", d);
		free(d);
		if (r < 0) {
			g[i].name = NULL;
			return -1;
		}
	}
	return 0;
}

json_t *cli_stats_checkpoints(const cli_vvec *vec, const char *counted,
                              const uint64_t *z19)
{
	size_t n = 0, ng = 0;
	size_t *idx = malloc((vec->n ? vec->n : 1) * sizeof(*idx));
	ck_group *g = calloc(vec->n ? vec->n : 1, sizeof(*g));
	json_t *arr = NULL;

	if (!idx || !g)
		goto out;
	for (size_t i = 0; i < vec->n; i++)
		if (counted[i])
			idx[n++] = i;
	qsort_r(idx, n, sizeof(*idx), by_dir_seq, (void *)vec);
	ng = make_groups(vec, idx, n, z19, g);
	if (name_groups(g, ng) < 0)
		goto out;
	qsort(g, ng, sizeof(*g), by_written);
	arr = json_array();
	for (size_t i = 0; arr && i < ng; i++) {
		json_t *o = json_pack("{s:s,s:I,s:I,s:I}", "name", g[i].name,
		                      "versions", (json_int_t)g[i].versions,
		                      "logical", (json_int_t)g[i].logical,
		                      "stored", (json_int_t)g[i].stored);
		if (o && z19)
			json_object_set_new(o, "zstd19",
			                    json_integer((json_int_t)g[i].z19));
		if (!o || json_array_append_new(arr, o) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
out:
	for (size_t i = 0; g && i < ng; i++)
		free(g[i].name);
	free(g);
	free(idx);
	return arr;
}
