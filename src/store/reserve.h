/*
 * reserve.h - the reserve file, given back when the disk is full (reserve.c).
 */
#ifndef ULP_STORE_RESERVE_H
#define ULP_STORE_RESERVE_H

#include "store/store_core.h"

/* ------------------------------------------------------------ reserve
 * (reserve.c; mu held) */

/* Give the reserve file back: 1 if there was one (retry), else 0. */
int ulp_reserve_release(ulp_store *st);
/* After a transaction that frees space failed with rc: whether to retry
 * it (rc is -ENOSPC, not retried yet, and the reserve was given back). */
int ulp_ns_retry_nospc(ulp_store *st, int rc, int *tried);
/* Allocate it again if it is missing and there is room. */
void ulp_reserve_restore(ulp_store *st);

#endif /* ULP_STORE_RESERVE_H */
