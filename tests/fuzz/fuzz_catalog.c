/*
 * fuzz_catalog.c - libFuzzer target: a published catalog snapshot as a
 * fresh mount of a bucket store downloads it, opened by the store
 * (ulp_cat_open: journal mode, PRAGMA quick_check, schema version and
 * migration).  The input is written to a file in a private directory
 * (under TMPDIR, else /dev/shm or /tmp) and opened there; SQLite itself is
 * the system's, not instrumented.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/catalog.h"
#include "fuzz_cpu.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[256], db[300], wal[310], shm[310];

static void cleanup(void)
{
	unlink(db);
	unlink(wal);
	unlink(shm);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *t = getenv("TMPDIR");
	if (!t || !*t)
		t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof dir, "%s/ulpfs-fuzz-catalog.XXXXXX", t);
	if (!mkdtemp(dir))
		abort();
	snprintf(db, sizeof db, "%s/catalog.db", dir);
	snprintf(wal, sizeof wal, "%s-wal", db);
	snprintf(shm, sizeof shm, "%s-shm", db);
	atexit(cleanup);
	return 0;
}

static void fuzz_one(const uint8_t *data, size_t size)
{
	unlink(wal);
	unlink(shm);
	int fd = open(db, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	ulp_catalog *c;
	if (ulp_cat_open(db, 0, 0, &c) == 0) {
		(void)ulp_cat_schema_version(c);
		ulp_cat_close(c);
	}
}
