/*
 * fuzz_catalog_pointer.c - libFuzzer target: the bucket's CATALOG
 * pointer, the first thing a fresh mount of a bucket store reads
 * (ulp_catalog_pointer_parse).  A name it accepts starts with
 * "catalog/" and fits the buffer.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "objstore/catalog_pointer.h"
#include "fuzz_cpu.h"

static void fuzz_one(const uint8_t *data, size_t size)
{
	char snap[128]; /* publish.c's */
	memset(snap, 'x', sizeof snap);
	if (ulp_catalog_pointer_parse(data, size, snap, sizeof snap) == 0) {
		size_t n = strnlen(snap, sizeof snap);
		if (n == sizeof snap || n < 8 || memcmp(snap, "catalog/", 8) ||
		    memchr(snap, '\n', n))
			abort();
	} else if (snap[0]) {
		abort(); /* a refused pointer names nothing */
	}
}
