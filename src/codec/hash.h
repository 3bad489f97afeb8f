/*
 * hash.h - xxHash for the codec's checksums, at the CPU's best speed.
 *
 * The codec hashes every payload and every decoded chunk; with the plain
 * (SSE2) XXH3 that was a fifth of a delta decode's instructions.  Where
 * libxxhash exports its run-time dispatched entry points, xxh_x86dispatch.h
 * renames XXH3_64bits, XXH3_128bits and their streaming forms to them, so
 * callers keep the ordinary names.  The hash values are the same either way.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_CODEC_HASH_H
#define ULP_CODEC_HASH_H

#include "config.h"

#include <xxhash.h>

#ifdef HAVE_XXH3_DISPATCH
#include <xxh_x86dispatch.h>
#endif

#endif
