/*
 * catalog_pointer.h - the bucket's CATALOG pointer object, which names
 * the published catalog snapshot a fresh mount downloads (publish.c).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_OBJSTORE_CATALOG_POINTER_H
#define ULP_OBJSTORE_CATALOG_POINTER_H

#include <stddef.h>

/* The snapshot name the pointer's n bytes at buf hold ("catalog/...", up
 * to the first newline) into snap[0..len): 0, or -EIO when they are
 * empty, too long or name no snapshot. */
int ulp_catalog_pointer_parse(const void *buf, size_t n, char *snap,
                              size_t len);

#endif
