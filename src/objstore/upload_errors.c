/*
 * upload_errors.c - the CACHE/upload-errors file (upload_errors.h).  A few
 * "key value" lines, so that a person can read it too.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include "objstore/upload_errors.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *path_of(const char *dir, const char *suffix)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s%s", dir, ULP_UPLOAD_ERRORS_FILE, suffix) < 0)
		return NULL;
	return p;
}

/* One line of text: newlines in a server's message would end the field. */
static void one_line(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r')
			*s = ' ';
}

int ulp_upload_errors_write(const char *cache_dir, const ulp_upload_errors *e)
{
	char *tmp = path_of(cache_dir, ".tmp"), *dst = path_of(cache_dir, "");
	int rc = tmp && dst ? 0 : -ENOMEM;
	FILE *f = rc ? NULL : fopen(tmp, "we");
	if (!rc && !f)
		rc = -errno;
	if (f) {
		ulp_upload_errors c = *e;
		one_line(c.url);
		one_line(c.error);
		fprintf(f,
		        "url %s\nfailures %" PRIu64 "\nfirst %lld\nlast %lld\n"
		        "permanent %d\nstaged %" PRId64 "\npending %" PRId64
		        "\nerror %s\n",
		        c.url, c.failures, c.first, c.last, c.permanent,
		        c.staged, c.pending, c.error);
		if (fclose(f) != 0)
			rc = -errno;
		if (!rc && rename(tmp, dst) < 0)
			rc = -errno;
		if (rc)
			unlink(tmp);
	}
	free(tmp);
	free(dst);
	return rc;
}

int ulp_upload_errors_read(const char *cache_dir, ulp_upload_errors *e)
{
	memset(e, 0, sizeof *e);
	e->staged = -1;
	char *p = path_of(cache_dir, "");
	if (!p)
		return -ENOMEM;
	FILE *f = fopen(p, "re");
	free(p);
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	char line[1100];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *v = strchr(line, ' ');
		if (!v)
			continue;
		*v++ = 0;
		if (!strcmp(line, "url"))
			snprintf(e->url, sizeof e->url, "%s", v);
		else if (!strcmp(line, "error"))
			snprintf(e->error, sizeof e->error, "%s", v);
		else if (!strcmp(line, "failures"))
			e->failures = strtoull(v, NULL, 10);
		else if (!strcmp(line, "first"))
			e->first = strtoll(v, NULL, 10);
		else if (!strcmp(line, "last"))
			e->last = strtoll(v, NULL, 10);
		else if (!strcmp(line, "permanent"))
			e->permanent = atoi(v) != 0;
		else if (!strcmp(line, "staged"))
			e->staged = strtoll(v, NULL, 10);
		else if (!strcmp(line, "pending"))
			e->pending = strtoll(v, NULL, 10);
	}
	fclose(f);
	return 1;
}

void ulp_upload_errors_clear(const char *cache_dir)
{
	char *p = path_of(cache_dir, "");
	if (p)
		unlink(p);
	free(p);
}

int64_t ulp_upload_errors_staged(const char *cache_dir)
{
	char *p = NULL;
	if (asprintf(&p, "%s/staging", cache_dir) < 0)
		return -ENOMEM;
	DIR *d = opendir(p);
	free(p);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	int64_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}
