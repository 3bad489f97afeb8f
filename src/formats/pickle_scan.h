/*
 * pickle_scan.h - find torch storage records in a pickle without running it.
 *
 * torch.save pickles each storage as the persistent id
 *     ('storage', torch.<Type>Storage, '<key>', '<location>', numel)
 * followed by BINPERSID.  The scanner walks every opcode of protocols 0-5,
 * models only what it needs to recognise those tuples (strings, globals,
 * ints, marks, tuples, the memo) and treats every other value as opaque.
 */
#ifndef ULPFS_PICKLE_SCAN_H
#define ULPFS_PICKLE_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* Longest storage type name kept, without "Storage", NUL included; fits
 * ulp_tensor.dtype_name. */
#define ULP_PICKLE_TYPE_MAX 24

typedef struct ulp_pickle_storage {
	const uint8_t *key; /* points into the scanned pickle; not NUL-ended */
	size_t key_len;
	char type[ULP_PICKLE_TYPE_MAX]; /* "Float", "BFloat16", "Long", ... */
	int has_numel;                  /* numel was an int that fit int64 */
	int64_t numel;
} ulp_pickle_storage;

typedef struct ulp_pickle_scan {
	size_t n;
	ulp_pickle_storage *v; /* in the order the pickle persists them */
} ulp_pickle_scan;

/* Scan pkl[0..len) up to its STOP opcode.  Returns ULP_OK with *out
 * filled (possibly n == 0), ULP_ERR_PARSE for a stream the Python unpickler
 * would also reject (unknown opcode, truncated argument, stack underflow,
 * missing memo entry, no STOP) or one past this scanner's bounds, or
 * ULP_ERR_NOMEM.  On error *out is empty.  Keys point into pkl, which must
 * outlive *out. */
int ulp_pickle_scan_storages(const uint8_t *pkl, size_t len,
                             ulp_pickle_scan *out);
void ulp_pickle_scan_free(ulp_pickle_scan *scan);

#endif /* ULPFS_PICKLE_SCAN_H */
