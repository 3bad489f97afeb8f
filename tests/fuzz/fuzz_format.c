/*
 * fuzz_format.c - libFuzzer target: a strict tensor-file parser on any
 * file, ulp_safetensors_parse (fuzz_safetensors) or, built with
 * -DFUZZ_TORCHZIP=1 (fuzz_torchzip), ulp_torchzip_parse (the zip's
 * directory and the pickle's storages), or with -DFUZZ_DISTCP=1
 * (fuzz_distcp), ulp_distcp_parse (archives back to back).  A parsed map must keep what
 * ulp.h promises: tensors sorted by offset, non-overlapping, each
 * entirely inside the file, with a name and a dtype of the codec.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdlib.h>

#include "ulpfs/ulp.h"
#include "fuzz_cpu.h"

#ifndef FUZZ_TORCHZIP
#define FUZZ_TORCHZIP 0
#endif
#ifndef FUZZ_DISTCP
#define FUZZ_DISTCP 0
#endif

static void check_map(const ulp_tensor_map *m, uint64_t size)
{
	uint64_t end = 0;
	for (size_t i = 0; i < m->n; i++) {
		const ulp_tensor *t = &m->v[i];
		if (!t->name || t->offset < end || t->offset > size ||
		    t->nbytes > size - t->offset ||
		    (unsigned)t->dtype >= ULP_DT_COUNT ||
		    (t->ndim && !t->shape))
			abort();
		end = t->offset + t->nbytes;
	}
	(void)ulp_tensor_map_layout_hash(m);
}

static void fuzz_one(const uint8_t *data, size_t size)
{
	ulp_tensor_map m;
	int rc = FUZZ_DISTCP     ? ulp_distcp_parse(data, size, &m)
	         : FUZZ_TORCHZIP ? ulp_torchzip_parse(data, size, &m)
	                         : ulp_safetensors_parse(data, size, &m);
	if (rc == ULP_OK)
		check_map(&m, size);
	else if (m.n)
		abort(); /* a failed parse leaves the map empty */
	ulp_tensor_map_free(&m);
}
