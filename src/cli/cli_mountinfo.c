/*
 * cli_mountinfo.c - finding ulpfs mounts in /proc/self/mountinfo: a mount
 * has fstype fuse.ulpfs and the store's absolute path as its source.  And
 * finding the copies of a mount that other mount namespaces hold.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
			              (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

void cli_mount_ent_free(cli_mount_ent *e)
{
	free(e->target);
	free(e->fstype);
	free(e->source);
	memset(e, 0, sizeof(*e));
}

/* Whether path is dir or below it. */
static int within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (strcmp(dir, "/") == 0)
		return 1;
	return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* What scan() looks for in a mountinfo file. */
enum {
	BY_TARGET, /* the topmost mount on key */
	BY_SOURCE, /* the ulpfs mount whose source is key */
	OF_PATH,   /* the innermost ulpfs mount that the path key is in */
	BY_DEV,    /* a mount of the superblock key ("MAJOR:MINOR") */
};

/* Whether the mount (dev, target, type, src) is what mode looks for; best
 * is the one found so far, if any. */
static int matches(int mode, const char *key, const char *dev,
                   const char *target, const char *type, const char *src,
                   const cli_mount_ent *best)
{
	switch (mode) {
	case BY_TARGET:
		return strcmp(target, key) == 0;
	case BY_SOURCE:
		return strcmp(type, "fuse.ulpfs") == 0 && strcmp(src, key) == 0;
	case OF_PATH:
		return strcmp(type, "fuse.ulpfs") == 0 && within(key, target) &&
		       (!best->target ||
		        strlen(target) >= strlen(best->target));
	default:
		return strcmp(dev, key) == 0;
	}
}

/* The last mount in the mountinfo file that matches (BY_DEV: the first):
 * 1 found (in *out), 0 not, -1 error. */
static int scan(const char *mountinfo, const char *key, int mode,
                cli_mount_ent *out)
{
	FILE *f = fopen(mountinfo, "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	if (!f)
		return -1;
	memset(out, 0, sizeof(*out));
	while (getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT TARGET OPTS [OPTIONAL...] - TYPE SRC SOPTS */
		char *save = NULL, *fld[5] = { 0 };
		int i = 0;
		for (char *t = strtok_r(line, " \n", &save); t && i < 5;
		     t = strtok_r(NULL, " \n", &save))
			fld[i++] = t;
		if (i < 5)
			continue;
		char *target = fld[4], *t, *type = NULL, *src = NULL;
		while ((t = strtok_r(NULL, " \n", &save)) != NULL)
			if (strcmp(t, "-") == 0) {
				type = strtok_r(NULL, " \n", &save);
				src = strtok_r(NULL, " \n", &save);
				break;
			}
		if (!type || !src)
			continue;
		unescape(target);
		unescape(src);
		if (!matches(mode, key, fld[2], target, type, src, out))
			continue;
		cli_mount_ent_free(out);
		out->target = strdup(target);
		out->fstype = strdup(type);
		out->source = strdup(src);
		snprintf(out->dev, sizeof(out->dev), "%s", fld[2]);
		if (!out->target || !out->fstype || !out->source) {
			cli_mount_ent_free(out);
			found = -1;
			break;
		}
		found = 1;
		if (mode == BY_DEV)
			break;
	}
	free(line);
	fclose(f);
	return found;
}

int cli_find_mount(const char *path, int by_source, cli_mount_ent *out)
{
	return scan("/proc/self/mountinfo", path,
	            by_source ? BY_SOURCE : BY_TARGET, out);
}

int cli_find_mount_of(const char *path, cli_mount_ent *out)
{
	return scan("/proc/self/mountinfo", path, OF_PATH, out);
}

/* Whether a mountinfo file lists a mount of the superblock dev. */
static int lists_dev(const char *mountinfo, const char *dev)
{
	cli_mount_ent e = { 0 };
	int found = scan(mountinfo, dev, BY_DEV, &e) == 1;
	cli_mount_ent_free(&e);
	return found;
}

int cli_mount_holders(const char *dev, long *pids, int max)
{
	char self[64] = "", ns[64], path[64];
	ssize_t k = readlink("/proc/self/ns/mnt", self, sizeof(self) - 1);
	if (k < 0)
		return -1;
	self[k] = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	/* Namespaces already looked at: each is read once, through the
	 * first of its processes met. */
	char(*seen)[64] = NULL;
	int nseen = 0, cap = 0, holders = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		long pid = strtol(e->d_name, NULL, 10);
		snprintf(path, sizeof(path), "/proc/%ld/ns/mnt", pid);
		k = readlink(path, ns, sizeof(ns) - 1);
		if (k < 0)
			continue;
		ns[k] = 0;
		if (strcmp(ns, self) == 0)
			continue;
		int i;
		for (i = 0; i < nseen && strcmp(seen[i], ns) != 0; i++)
			;
		if (i < nseen)
			continue;
		if (nseen == cap) {
			int ncap = cap ? 2 * cap : 16;
			char(*g)[64] = realloc(seen, (size_t)ncap * sizeof(*g));
			if (!g) {
				holders = -1;
				break;
			}
			seen = g, cap = ncap;
		}
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", ns);
		snprintf(path, sizeof(path), "/proc/%ld/mountinfo", pid);
		if (lists_dev(path, dev)) {
			if (holders < max)
				pids[holders] = pid;
			holders++;
		}
	}
	free(seen);
	closedir(d);
	return holders;
}
