/*
 * ctl_verify.c - `ulpfs verify`: every version's stored bytes decoded and
 * checked against its hash, and on a bucket store the objects only the
 * bucket holds.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_ops.h"
#include "objstore/verify.h"

#define PIECE (4u << 20)

static void hex(const uint8_t h[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* Check the stored bytes of version v's object, decode v and check its
 * hash; the progress counts into *done of total.  0, or a message in why
 * and -1. */
static int verify_one(cli_env *env, ulp_store *st, const ulp_version_info *v,
                      uint8_t *buf, uint64_t *done, uint64_t total, char *why,
                      size_t whylen)
{
	/* Decodes check the decoded bytes only, and a chunk decoded before
	 * its object was damaged may still be cached. */
	size_t badc = 0;
	int err = ulp_version_check_stored(st, v->id, &badc);
	if (err == -EBADMSG) {
		snprintf(why, whylen,
		         "stored chunk %zu of its object fails its checksum",
		         badc);
		return -1;
	}
	if (err) {
		/* as the decode below would say: it reads the same object */
		snprintf(why, whylen, "cannot decode: %s", strerror(-err));
		return -1;
	}
	/* The catalog holds the hash of the kind the version was committed
	 * with (flat before object format 3): both are computed in the one
	 * pass. */
	ulp_hasher *tree = ulp_hasher_new(ULP_HASH_TREE);
	ulp_hasher *flat = ulp_hasher_new(ULP_HASH_FLAT);
	err = tree && flat ? 0 : -ENOMEM;
	for (uint64_t off = 0; !err && off < v->size;) {
		size_t n = v->size - off < PIECE ? (size_t)(v->size - off)
		                                 : PIECE;
		ssize_t got = ulp_version_read(st, v->id, buf, n, off);
		if (got <= 0) {
			err = got < 0 ? (int)got : -EIO;
			break;
		}
		ulp_hasher_update(tree, buf, (size_t)got);
		ulp_hasher_update(flat, buf, (size_t)got);
		off += (uint64_t)got;
		*done += (uint64_t)got;
		env->sink->progress(env->sink->opaque, "verify", *done, total);
	}
	uint8_t ht[16], hf[16];
	if (!err && (ulp_hasher_final(tree, ht) || ulp_hasher_final(flat, hf)))
		err = -EIO;
	ulp_hasher_free(tree);
	ulp_hasher_free(flat);
	if (err) {
		snprintf(why, whylen, "cannot decode: %s", strerror(-err));
		return -1;
	}
	if (memcmp(ht, v->hash, 16) != 0 && memcmp(hf, v->hash, 16) != 0) {
		char want[33], got[33];
		hex(v->hash, want);
		hex(ht, got);
		snprintf(why, whylen, "hash mismatch (catalog %s, decoded %s)",
		         want, got);
		return -1;
	}
	return 0;
}

/* The index of version id in all's list, or all->vec.n (deleted). */
static size_t vall_find(const cli_vall *all, uint64_t id)
{
	size_t i = 0;
	while (i < all->vec.n && all->vec.v[i].id != id)
		i++;
	return i;
}

/* Why version j of view failed, beyond its own object: the bad base it is
 * coded along (its failure follows), or the object of its bucket chain
 * that could not be read.  "" when neither. */
static void chain_why(const ulp_bucket_view *view, const cli_vall *all,
                      const char *badv, size_t j, const char *failed, char *out,
                      size_t len)
{
	uint64_t base = ulp_bucket_view_base(view, j);
	out[0] = 0;
	for (size_t k = 0; base && k < j; k++) {
		size_t i = vall_find(all, base);
		if (ulp_bucket_view_version(view, k) == base && badv[k] &&
		    i < all->vec.n) {
			snprintf(out, len, " (coded along %s@%" PRIu64 ", bad)",
			         all->vec.path[i], all->vec.v[i].seq);
			return;
		}
	}
	if (failed[0] && strcmp(failed, ulp_bucket_view_key(view, j)) != 0)
		snprintf(out, len, " (reading %s of its bucket chain)", failed);
}

/* The bucket-only representations of a writer's versions (all: the
 * writer's list), decoded from the bucket along their bucket chains
 * (objstore/verify.h).  The bad ones counted into *bad; *n the checked
 * ones.  0 or -errno (the view could not be made). */
static int verify_bucket(cli_env *env, const cli_vall *all, uint8_t *buf,
                         uint64_t *bad, size_t *n)
{
	ulp_bucket_view *view = NULL;
	int rc = ulp_bucket_view_open(env->bucket, &view);
	*n = ulp_bucket_view_count(view);
	char *badv = calloc(*n ? *n : 1, 1);
	uint64_t total = 0, done = 0;
	if (!badv && !rc)
		rc = -ENOMEM;
	for (size_t j = 0; j < *n; j++) {
		size_t i = vall_find(all, ulp_bucket_view_version(view, j));
		total += i < all->vec.n ? all->vec.v[i].size : 0;
	}
	for (size_t j = 0; rc == 0 && j < *n; j++) {
		size_t i = vall_find(all, ulp_bucket_view_version(view, j));
		if (i == all->vec.n)
			continue; /* deleted since the list */
		char why[200], failed[1024], chain[1200];
		ulp_bucket_view_failed(view, failed, sizeof failed); /* clear */
		if (verify_one(env, ulp_bucket_view_store(view), &all->vec.v[i],
		               buf, &done, total, why, sizeof why) == 0)
			continue;
		ulp_bucket_view_failed(view, failed, sizeof failed);
		chain_why(view, all, badv, j, failed, chain, sizeof chain);
		cli_errf(env, "%s@%" PRIu64 ": bucket object %s: %s%s",
		         all->vec.path[i], all->vec.v[i].seq,
		         ulp_bucket_view_key(view, j), why, chain);
		badv[j] = 1;
		(*bad)++;
	}
	free(badv);
	ulp_bucket_view_close(view);
	return rc;
}

int cli_op_verify(cli_env *env, json_t *req)
{
	cli_vall a = { 0 };
	uint64_t done = 0, bad = 0;
	uint8_t *buf = malloc(PIECE);
	int rc = buf ? ulp_version_list(env->st, NULL, cli_vall_add, &a)
	             : -ENOMEM;
	(void)req;

	for (size_t i = 0; rc == 0 && i < a.vec.n; i++) {
		char why[200];
		if (verify_one(env, env->st, &a.vec.v[i], buf, &done, a.bytes,
		               why, sizeof why) < 0) {
			cli_errf(env, "%s@%" PRIu64 ": %s", a.vec.path[i],
			         a.vec.v[i].seq, why);
			bad++;
		}
	}
	if (rc == 0)
		env->sink->progress(env->sink->opaque, "verify", a.bytes,
		                    a.bytes);
	size_t nb = 0;
	int writer = ulp_bucket_view_writer(env->bucket);
	if (rc == 0 && writer)
		rc = verify_bucket(env, &a, buf, &bad, &nb);
	free(buf);
	size_t n = a.vec.n;
	cli_vvec_free(&a.vec);
	if (rc < 0) {
		cli_errf(env, "verify: %s", strerror(-rc));
		return CLI_FAIL;
	}
	if (writer)
		cli_outf(env,
		         "%zu versions checked, %zu bucket-only objects "
		         "checked, %" PRIu64 " bad\n",
		         n, nb, bad);
	else
		cli_outf(env, "%zu versions checked, %" PRIu64 " bad\n", n,
		         bad);
	return bad ? CLI_FAIL : CLI_OK;
}
