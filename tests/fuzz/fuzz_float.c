/*
 * fuzz_float.c - libFuzzer target: the float stream decoder
 * (ulp_float_decode) on any stream, with or without a reference.
 *
 * Input (fuzz_input.h): a the dtype (ULP_DT_BF16 + a % 6), b bit 0
 * whether a reference is given (side's bytes repeated), n elements; the
 * stream.  Kernels as in fuzz_rans.c (ULPFS_SIMD, ULPFS_RANS_GATHERS).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdlib.h>

#include "floatcode.h"
#include "fuzz_input.h"
#include "fuzz_cpu.h"

static ulp_float_scratch *fs;

static void fuzz_one(const uint8_t *data, size_t size)
{
	ulp_fuzz_in in;
	if (ulp_fuzz_split(data, size, &in))
		return;
	if (!fs && !(fs = ulp_float_scratch_new()))
		abort();
	ulp_dtype dt = (ulp_dtype)(ULP_DT_BF16 + in.a % 6);
	ulp_float_fmt f = ulp_dtype_fmt(dt);
	size_t bytes = in.n * (f.width / 8);
	uint8_t *ref = NULL, *dst = malloc(bytes + 1);
	if (!dst)
		abort();
	if (in.b & 1) {
		if (!(ref = malloc(bytes + 1)))
			abort();
		ulp_fuzz_repeat(&in, ref, bytes);
	}
	(void)ulp_float_decode(fs, f, in.stream, in.stream_len, ref, in.n, dst);
	free(ref);
	free(dst);
}
