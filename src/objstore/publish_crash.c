/*
 * publish_crash.c - ULPFS_TEST_CRASH_PUBLISH: a writer's publish kills its
 * own process at a chosen point (bucket_internal.h lists them), so that
 * tests/s3_publish_crash.sh can check what a kill -9 there leaves.  Only
 * tests set it.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/bucket_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

void ulp_publish_crash_init(ulp_bucket *b)
{
	static const char *const names[] = { "",        "flush",  "snapshot",
		                             "pointer", "record", "deletes",
		                             "forward" };
	const char *env = getenv("ULPFS_TEST_CRASH_PUBLISH");
	if (!env || !*env || b->o.read_only)
		return;
	size_t n = strcspn(env, ":");
	for (int i = ULP_CRASH_FLUSH; i <= ULP_CRASH_FORWARD; i++)
		if (strlen(names[i]) == n && !strncmp(env, names[i], n))
			b->crash_at = i;
	b->crash_n = env[n] == ':' ? (unsigned)strtoul(env + n + 1, NULL, 10)
	                           : 1;
	if (!b->crash_at)
		ulp_bucket_log("ULPFS_TEST_CRASH_PUBLISH=%s: no such point "
		               "(ignored)",
		               env);
}

void ulp_publish_crash(const ulp_bucket *b, int point)
{
	if (b->crash_at == point) {
		ulp_bucket_log("ULPFS_TEST_CRASH_PUBLISH=%s: killing the "
		               "daemon",
		               getenv("ULPFS_TEST_CRASH_PUBLISH"));
		raise(SIGKILL);
	}
}

void ulp_publish_crash_upload(ulp_bucket *b)
{
	if (b->crash_at != ULP_CRASH_FLUSH)
		return;
	pthread_mutex_lock(&b->mu);
	int closed = b->gate;
	pthread_mutex_unlock(&b->mu);
	if (closed && atomic_fetch_add(&b->crash_uploads, 1) + 1 >= b->crash_n)
		ulp_publish_crash(b, ULP_CRASH_FLUSH);
}
