/*
 * fuzz_input.h - the framing the codec's stream targets share
 * (fuzz_rans.c, fuzz_float.c and make_seeds.c, which writes their seeds).
 *
 *   u8 a, u8 b, u32 n (little-endian), u16 side_len, side[side_len],
 *   then the stream itself
 *
 * side holds the contexts or reference elements of the stream; they are
 * repeated cyclically up to the n elements the stream needs, so that a
 * small input can stand for a long stream (the 64-lane rANS blocks start
 * at 131072 symbols, the sampled delta streams at 262144 elements).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_FUZZ_INPUT_H
#define ULP_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ULP_FUZZ_HDR 8
/* elements of one input at most: past ULP_DELTA_SAMPLED_MIN */
#define ULP_FUZZ_MAX_N (1u << 19)

typedef struct ulp_fuzz_in {
	unsigned a, b;
	size_t n;
	const uint8_t *side;
	size_t side_len;
	const uint8_t *stream;
	size_t stream_len;
} ulp_fuzz_in;

/* 0, or -1 when data[0..size) is too short for its header. */
static inline int ulp_fuzz_split(const uint8_t *data, size_t size,
                                 ulp_fuzz_in *in)
{
	if (size < ULP_FUZZ_HDR)
		return -1;
	in->a = data[0];
	in->b = data[1];
	in->n = ((size_t)data[2] | (size_t)data[3] << 8 |
	         (size_t)data[4] << 16 | (size_t)data[5] << 24) %
	        (ULP_FUZZ_MAX_N + 1);
	in->side_len = (size_t)data[6] | (size_t)data[7] << 8;
	if (in->side_len > size - ULP_FUZZ_HDR)
		in->side_len = size - ULP_FUZZ_HDR;
	in->side = data + ULP_FUZZ_HDR;
	in->stream = in->side + in->side_len;
	in->stream_len = size - ULP_FUZZ_HDR - in->side_len;
	return 0;
}

/* dst[0..len) from side repeated (zeros when there is none). */
static inline void ulp_fuzz_repeat(const ulp_fuzz_in *in, uint8_t *dst,
                                   size_t len)
{
	if (!in->side_len) {
		memset(dst, 0, len);
		return;
	}
	for (size_t o = 0; o < len; o += in->side_len) {
		size_t k = len - o < in->side_len ? len - o : in->side_len;
		memcpy(dst + o, in->side, k);
	}
}

/* The header of an input (make_seeds.c). */
static inline void ulp_fuzz_header(uint8_t h[ULP_FUZZ_HDR], unsigned a,
                                   unsigned b, size_t n, size_t side_len)
{
	h[0] = (uint8_t)a;
	h[1] = (uint8_t)b;
	for (int i = 0; i < 4; i++)
		h[2 + i] = (uint8_t)(n >> (8 * i));
	h[6] = (uint8_t)side_len;
	h[7] = (uint8_t)(side_len >> 8);
}

#endif
