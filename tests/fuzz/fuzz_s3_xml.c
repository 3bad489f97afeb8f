/*
 * fuzz_s3_xml.c - libFuzzer target: the S3 XML response parsers
 * (s3_xml.c) on any body: an <Error>, an upload id, a ListObjectsV2
 * page and a ListMultipartUploads page, each parser on every input.
 * Names handed to the callbacks must be NUL-terminated strings.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdlib.h>
#include <string.h>

#include "objstore/s3_internal.h"
#include "fuzz_cpu.h"

static volatile size_t sink;

static int on_key(void *ctx, const char *key, uint64_t size)
{
	(void)ctx;
	sink += strlen(key) + (size_t)size;
	return 0;
}

static int on_upload(void *ctx, const char *key, const char *id)
{
	(void)ctx;
	sink += strlen(key) + strlen(id);
	return 0;
}

static void fuzz_one(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	ulp_s3_xml_error e;
	if (ulp_s3_xml_error_parse(body, size, &e) == 1)
		sink += strlen(e.code) + strlen(e.message);
	char id[256];
	if (ulp_s3_xml_upload_id(body, size, id, sizeof id) == 0)
		sink += strlen(id);
	int cb_rc = 0, truncated = 0;
	char *next = NULL;
	if (ulp_s3_xml_list(body, size, on_key, NULL, &cb_rc, &truncated,
	                    &next) == 0 &&
	    next)
		sink += strlen(next);
	free(next);
	(void)ulp_s3_xml_uploads(body, size, on_upload, NULL, &cb_rc);
}
