/*
 * make_seeds.c - the seeds of the codec's stream targets (fuzz_rans,
 * fuzz_float): real blocks and streams, written by the codec's own
 * encoders, framed as fuzz_input.h says.  Run by tests/fuzz/make_seeds.sh
 * (the seeds are committed; the tests never run it).
 *
 *   make_seeds DATA OUTDIR
 *
 * DATA is a real checkpoint (tests/data/tiny_optim.pt): its bytes are
 * the symbols, contexts and reference elements.  The elements coded
 * against a reference are the reference with one in 64 nudged by a ULP
 * or a few, as between two checkpoints of a training run.  Also a new
 * catalog of the current schema (fuzz_catalog), as ulp_cat_open makes
 * it.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floatcode.h"
#include "store/catalog.h"
#include "fuzz_input.h"
#include "rans.h"

static const char *outdir;
static uint8_t *data;
static size_t data_len;

static void die(const char *what)
{
	fprintf(stderr, "make_seeds: %s\n", what);
	exit(1);
}

static void emit(const char *dir, const char *name, unsigned a, unsigned b,
                 size_t n, const uint8_t *side, size_t side_len,
                 const ulp_buf *stream)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s/%s", outdir, dir, name);
	FILE *f = fopen(path, "wb");
	uint8_t h[ULP_FUZZ_HDR];
	ulp_fuzz_header(h, a, b, n, side_len);
	if (!f || fwrite(h, 1, sizeof h, f) != sizeof h ||
	    fwrite(side, 1, side_len, f) != side_len ||
	    fwrite(stream->p, 1, stream->len, f) != stream->len || fclose(f))
		die(path);
}

/* A rANS block of n symbols (data's bytes, masked to nsym values) in
 * lanes lanes; mode as fuzz_rans.c's b. */
static void rans_seed(const char *name, unsigned nsym, unsigned mode, size_t n,
                      size_t side_len, unsigned lanes, int esc)
{
	ulp_rans_scratch *sc = ulp_rans_scratch_new();
	uint8_t *sym = malloc(n), *ctx = malloc(n), *ref = malloc(2 * n);
	uint32_t *hist = calloc(256 * (size_t)nsym, sizeof *hist);
	ulp_fuzz_in in = { .side = data, .side_len = side_len };
	ulp_buf out = { 0 };
	if (!sc || !sym || !ctx || !ref || !hist || side_len > data_len)
		die("out of memory");
	/* the long blocks mostly one symbol, so that their seeds stay small */
	for (size_t i = 0; i < n; i++)
		sym[i] = n > 65536 && i % 61
		                 ? 0
		                 : data[(i * 7 + 3) % data_len] % nsym;
	ulp_fuzz_repeat(&in, ctx, n);
	ulp_fuzz_repeat(&in, ref, 2 * n);
	unsigned shift = (mode >> 2) & 15, emask = mode & 0x80 ? 0x1f : 0xff;
	for (size_t i = 0; (mode & 3) == 2 && i < n; i++)
		ctx[i] = ((ref[2 * i] | ref[2 * i + 1] << 8) >> shift) & emask;
	const uint8_t *c = (mode & 3) ? ctx : NULL;
	for (size_t i = 0; i < n; i++)
		hist[(c ? c[i] : 0) * nsym + sym[i]]++;
	for (size_t i = 0; esc && i < 256 * (size_t)nsym; i++)
		hist[i] &= ~1u; /* a sample's counts miss the odd ones */
	ulp_rans_scratch_set_lanes(sc, lanes);
	size_t nesc;
	int rc = esc ? ulp_rans_encode_esc(sc, sym, c, n, nsym, 256, hist, &out,
	                                   &nesc)
	             : ulp_rans_encode(sc, sym, c, n, nsym, 256, hist, &out);
	if (rc)
		die(name);
	emit("rans", name, nsym - 1, mode, n, data, (mode & 3) ? side_len : 0,
	     &out);
	ulp_buf_free(&out);
	free(sym);
	free(ctx);
	free(ref);
	free(hist);
	ulp_rans_scratch_free(sc);
}

/* A float stream of n elements of dtype dt, with a reference (data's
 * first side_len bytes repeated) or without (those bytes are the
 * elements). */
static void float_seed(const char *name, ulp_dtype dt, int with_ref, size_t n,
                       size_t side_len)
{
	ulp_float_fmt f = ulp_dtype_fmt(dt);
	size_t w = f.width / 8, bytes = n * w;
	ulp_fuzz_in in = { .side = data, .side_len = side_len };
	uint8_t *ref = malloc(bytes), *cur = malloc(bytes);
	ulp_float_scratch *fs = ulp_float_scratch_new();
	ulp_buf out = { 0 };
	if (!ref || !cur || !fs || side_len > data_len)
		die("out of memory");
	ulp_fuzz_repeat(&in, ref, bytes);
	memcpy(cur, ref, bytes);
	for (size_t i = 0; with_ref && i < n; i += 64)
		cur[i * w] ^= (uint8_t)(1 + i % 5); /* low byte: a few ULPs */
	if (ulp_float_encode(fs, f, cur, with_ref ? ref : NULL, n, 0, &out,
	                     NULL))
		die(name);
	emit("float", name, dt - ULP_DT_BF16, with_ref, n, data,
	     with_ref ? side_len : 0, &out);
	ulp_buf_free(&out);
	free(ref);
	free(cur);
	ulp_float_scratch_free(fs);
}

static void catalog_seed(void)
{
	char path[512];
	snprintf(path, sizeof path, "%s/catalog/current-schema.db", outdir);
	remove(path);
	ulp_catalog *c;
	if (ulp_cat_open(path, 0, 0, &c))
		die(path);
	ulp_cat_close(c);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		die("usage: make_seeds DATA OUTDIR");
	outdir = argv[2];
	FILE *f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (data_len = (size_t)ftell(f)) < 2048)
		die(argv[1]);
	rewind(f);
	if (!(data = malloc(data_len)) ||
	    fread(data, 1, data_len, f) != data_len)
		die(argv[1]);
	fclose(f);

	rans_seed("w4-nsym256", 256, 0, 3000, 0, 4, 0);
	rans_seed("w32-ctx", 64, 1, 6000, 1024, 32, 0);
	rans_seed("w64-ctx-esc", 200, 1, 140000, 1024, 64, 1);
	rans_seed("w32-ref16-bf16", 32, 2 | (7 << 2), 8192, 2048, 32, 0);
	rans_seed("w64-ref16-f16", 40, 2 | (10 << 2) | 0x80, 140000, 2048, 64,
	          0);
	rans_seed("w4-esc", 16, 0, 2000, 0, 4, 1);

	static const struct {
		ulp_dtype dt;
		const char *name;
	} dts[] = { { ULP_DT_BF16, "bf16" },   { ULP_DT_F16, "f16" },
		    { ULP_DT_F32, "f32" },     { ULP_DT_F64, "f64" },
		    { ULP_DT_F8E4M3, "e4m3" }, { ULP_DT_F8E5M2, "e5m2" } };
	char name[64];
	for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
		snprintf(name, sizeof name, "%s-ref", dts[i].name);
		float_seed(name, dts[i].dt, 1, 4096, 2048);
		snprintf(name, sizeof name, "%s-alone", dts[i].name);
		float_seed(name, dts[i].dt, 0, 256, 2048);
	}
	/* FUSED (1024 elements and more) and the sampled deltas (262144) */
	float_seed("bf16-fused", ULP_DT_BF16, 0, 1024, 2048);
	float_seed("f32-fused", ULP_DT_F32, 0, 1024, 2048);
	float_seed("bf16-sampled-ref", ULP_DT_BF16, 1, 300000, 2048);
	catalog_seed();
	free(data);
	return 0;
}
