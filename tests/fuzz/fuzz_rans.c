/*
 * fuzz_rans.c - libFuzzer target: the rANS decoder (ulp_rans_decode,
 * ulp_rans_decode_ref16) on any block.
 *
 * Input (fuzz_input.h): a = nsym - 1; b bits 0-1 the contexts (0: none,
 * 1: side's bytes, 2: side as 16-bit reference elements, contexts
 * (ref >> shift) & emask with shift b bits 2-5, emask 0x1f if b bit 7
 * else 0xff); n symbols; the block.  Which kernels decode it is the
 * codec's choice from the CPU, capped by ULPFS_SIMD and switched by
 * ULPFS_RANS_GATHERS (tests/fuzz/run.sh runs a process per variant).
 * A block that decodes must give symbols below nsym and claim no more
 * bytes than it was given.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdlib.h>

#include "fuzz_input.h"
#include "rans.h"
#include "fuzz_cpu.h"

static ulp_rans_scratch *sc;

static void fuzz_one(const uint8_t *data, size_t size)
{
	ulp_fuzz_in in;
	if (ulp_fuzz_split(data, size, &in))
		return;
	if (!sc && !(sc = ulp_rans_scratch_new()))
		abort();
	unsigned nsym = in.a + 1, mode = in.b & 3;
	size_t n = in.n, used = 0;
	uint8_t *sym = malloc(n + 1), *ctx = malloc(n + 1);
	uint8_t *ref = malloc(2 * n + 1);
	if (!sym || !ctx || !ref)
		abort();
	int rc;
	if (mode == 2) {
		ulp_fuzz_repeat(&in, ref, 2 * n);
		rc = ulp_rans_decode_ref16(sc, in.stream, in.stream_len, ref,
		                           (in.b >> 2) & 15,
		                           in.b & 0x80 ? 0x1f : 0xff, ctx, n,
		                           nsym, sym, &used);
	} else {
		ulp_fuzz_repeat(&in, ctx, n);
		rc = ulp_rans_decode(sc, in.stream, in.stream_len,
		                     mode ? ctx : NULL, n, nsym, sym, &used);
	}
	if (rc == 0) {
		if (used > in.stream_len)
			abort();
		for (size_t i = 0; i < n; i++)
			if (sym[i] >= nsym)
				abort();
	}
	free(sym);
	free(ctx);
	free(ref);
}
