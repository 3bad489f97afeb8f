/*
 * bitio.h - LSB-first bit writer and reader for raw residual bits.
 *
 * The bits below a residual's leading one are close to uniform, so they
 * are stored as they are; these two helpers are the hot path of the float
 * codec and are kept inline and branch-light.
 */
#ifndef ULP_BITIO_H
#define ULP_BITIO_H

#include <stdint.h>
#include <string.h>

typedef struct ulp_bitw {
	uint8_t *p; /* next byte; the caller reserved 8 bytes of slack */
	uint64_t acc;
	unsigned fill; /* valid bits in acc, always < 8 between calls */
} ulp_bitw;

/* Append the low n bits of v (n <= 56, v < 2^n).  Branch-free: the whole
 * accumulator is stored every time and the pointer advances by the
 * complete bytes, so the varying n of residuals never mispredicts. */
static inline void ulp_bitw_put(ulp_bitw *w, uint64_t v, unsigned n)
{
	w->acc |= v << w->fill;
	w->fill += n;
	memcpy(w->p, &w->acc, 8);
	w->p += w->fill >> 3;
	w->acc >>= w->fill & 56;
	w->fill &= 7;
}

/* Append up to 64 bits. */
static inline void ulp_bitw_put64(ulp_bitw *w, uint64_t v, unsigned n)
{
	if (n > 32) {
		ulp_bitw_put(w, v & 0xffffffffu, 32);
		v >>= 32;
		n -= 32;
	}
	ulp_bitw_put(w, v, n);
}

/* Word mode, for runs of puts that want fewer, longer pieces: append
 * the low n bits of v (n <= 64, v < 2^n) with up to 63 bits kept in
 * acc, so fill may exceed 7 until ulp_bitw_word_end.  Branch-free like
 * ulp_bitw_put; the bytes written are the same. */
static inline void ulp_bitw_put_word(ulp_bitw *w, uint64_t v, unsigned n)
{
	unsigned t = w->fill + n, full = t >> 6;
	w->acc |= v << w->fill;
	memcpy(w->p, &w->acc, 8);
	w->p += 8 * full;
	/* the bits of v that did not fit: v >> (64 - fill), 0 if fill is 0 */
	uint64_t rest = (v >> 1) >> (63 - w->fill);
	w->acc = full ? rest : w->acc;
	w->fill = t & 63;
}

/* Back from word mode to ulp_bitw_put's state (fill < 8). */
static inline void ulp_bitw_word_end(ulp_bitw *w)
{
	memcpy(w->p, &w->acc, 8);
	w->p += w->fill >> 3;
	w->acc >>= w->fill & 56;
	w->fill &= 7;
}

/* Flush the partial byte; returns the end pointer. */
static inline uint8_t *ulp_bitw_finish(ulp_bitw *w)
{
	if (w->fill > 0)
		*w->p++ = (uint8_t)w->acc;
	w->acc = 0;
	w->fill = 0;
	return w->p;
}

typedef struct ulp_bitr {
	const uint8_t *p, *end;
	uint64_t acc;
	unsigned fill;
	int overrun; /* set when more bits were asked for than exist */
} ulp_bitr;

static inline void ulp_bitr_init(ulp_bitr *r, const uint8_t *p, size_t len)
{
	r->p = p;
	r->end = p + len;
	r->acc = 0;
	r->fill = 0;
	r->overrun = 0;
}

/* Top the accumulator up to at least 56 bits where input remains. */
static inline void ulp_bitr_refill(ulp_bitr *r)
{
	if (r->end - r->p >= 8) {
		uint64_t v;
		memcpy(&v, r->p, 8);
		r->acc |= v << r->fill;
		r->p += (63 - r->fill) >> 3;
		r->fill |= 56;
	} else {
		while (r->fill <= 56 && r->p < r->end) {
			r->acc |= (uint64_t)*r->p++ << r->fill;
			r->fill += 8;
		}
	}
}

/* Read n <= 32 bits. */
static inline uint64_t ulp_bitr_get(ulp_bitr *r, unsigned n)
{
	if (r->fill < n) {
		ulp_bitr_refill(r);
		if (r->fill < n) {
			r->overrun = 1;
			r->fill = n;
		}
	}
	uint64_t v = r->acc & ((1ull << n) - 1);
	r->acc = n < 64 ? r->acc >> n : 0;
	r->fill -= n;
	return v;
}

static inline uint64_t ulp_bitr_get64(ulp_bitr *r, unsigned n)
{
	if (n > 32) {
		uint64_t lo = ulp_bitr_get(r, 32);
		return lo | (ulp_bitr_get(r, n - 32) << 32);
	}
	return ulp_bitr_get(r, n);
}

/* Bytes not yet consumed (the partial byte counts as consumed). */
static inline size_t ulp_bitr_left(const ulp_bitr *r)
{
	return (size_t)(r->end - r->p) + r->fill / 8;
}

#endif /* ULP_BITIO_H */
