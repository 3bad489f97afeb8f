/*
 * baseline.c - the byte-grouped entropy-coded baseline for benchmarks.
 *
 * ZipNN and LMC split floats into byte planes and entropy-code each plane
 * on its own.  Coding the planes with this library's own rANS (which beats
 * Huffman on skewed planes) makes the baseline a strong one.
 */
#include <stdlib.h>

#include "rans.h"

int ulp_baseline_bytegroup(const void *data, size_t len, unsigned width,
                           uint64_t *out_size)
{
	const uint8_t *src = data;
	const size_t block = ULP_CHUNK_SIZE_DEFAULT;
	uint32_t hist[256];
	ulp_buf out = { 0 };
	uint64_t total = 0;
	int rc = ULP_OK;

	if (!out_size || (len && !data) || !width || width > 8)
		return ULP_ERR_ARG;
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	uint8_t *plane = malloc(block / width + 1);
	if (!sc || !plane) {
		rc = ULP_ERR_NOMEM;
		goto done;
	}
	size_t nel = len / width;
	for (size_t start = 0; start < nel && !rc; start += block / width) {
		size_t n = nel - start < block / width ? nel - start
		                                       : block / width;
		for (unsigned b = 0; b < width && !rc; b++) {
			memset(hist, 0, sizeof(hist));
			for (size_t i = 0; i < n; i++) {
				plane[i] = src[(start + i) * width + b];
				hist[plane[i]]++;
			}
			out.len = 0;
			rc = ulp_rans_encode(sc, plane, NULL, n, 256, 1, hist,
			                     &out);
			total += out.len;
		}
	}
	total += len % width;
	*out_size = total;
done:
	ulp_buf_free(&out);
	free(plane);
	ulp_rans_scratch_free(sc);
	return rc;
}
