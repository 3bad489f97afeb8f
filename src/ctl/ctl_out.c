/*
 * ctl_out.c - what every operation of the executor shares: its output
 * through the request's sink, sizes and times as people read them, the
 * list of versions the listing callbacks fill, and committing what was
 * closed (ctl_ops.h).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_ops.h"

/* ------------------------------------------------------------ output */

void cli_outf(cli_env *env, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n >= 0)
		env->sink->out(env->sink->opaque, s, (size_t)n);
	free(s);
}

void cli_errf(cli_env *env, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	env->sink->err(env->sink->opaque, n >= 0 ? s : "out of memory");
	free(s);
}

void cli_human(uint64_t n, char buf[32])
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, 32, "%" PRIu64 " B", n);
	else
		snprintf(buf, 32, "%.1f %s", v, u[i]);
}

void cli_time(int64_t ns, char buf[32])
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, 32, "%Y-%m-%d %H:%M:%S", &tm);
}

/* ------------------------------------------------------------ versions */

int cli_vvec_add(void *opaque, const ulp_version_info *v, const char *path)
{
	cli_vvec *a = opaque;
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 64;
		ulp_version_info *nv = realloc(a->v, nc * sizeof(*nv));
		if (nv)
			a->v = nv;
		char **np = nv ? realloc(a->path, nc * sizeof(*np)) : NULL;
		if (!np)
			return -ENOMEM;
		a->path = np;
		a->cap = nc;
	}
	if (!(a->path[a->n] = strdup(path)))
		return -ENOMEM;
	a->v[a->n++] = *v;
	return 0;
}

void cli_vvec_free(cli_vvec *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->path[i]);
	free(a->path);
	free(a->v);
}

int cli_vall_add(void *opaque, const ulp_version_info *v, const char *path)
{
	cli_vall *a = opaque;
	if (v->state == ULP_VERSION_DELETED)
		return 0;
	int rc = cli_vvec_add(&a->vec, v, path);
	if (rc == 0)
		a->bytes += v->size;
	return rc;
}

/* ------------------------------------------------------------ sync */

int cli_env_sync(const cli_env *env)
{
	/* A descriptor kept open elsewhere (dup) must not hang sync: after
	 * the wait, whatever has been released is committed. */
	if (env->fs)
		(void)ulp_fs_wait_released(env->fs, 2000);
	return ulp_store_sync(env->st);
}
