/*
 * catalog_pointer.c - the CATALOG pointer's contents (see
 * catalog_pointer.h).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include "objstore/catalog_pointer.h"

#include <errno.h>
#include <string.h>

int ulp_catalog_pointer_parse(const void *buf, size_t n, char *snap, size_t len)
{
	snap[0] = '\0';
	if (n == 0 || n >= len || n < 8 || memcmp(buf, "catalog/", 8))
		return -EIO;
	memcpy(snap, buf, n);
	snap[n] = '\0';
	snap[strcspn(snap, "\n")] = '\0';
	return 0;
}
