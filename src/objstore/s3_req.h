/*
 * s3_req.h - one S3 request as s3_client.c performs it (signing, retries,
 * errors), shared with s3_multipart.c.  Not for other modules.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_S3_REQ_H
#define ULP_S3_REQ_H

#include <curl/curl.h>
#include <sys/types.h>

#include "objstore/s3_internal.h"

typedef struct ulp_s3_req {
	/* request */
	const char *method;
	const char *key;   /* "" for the bucket */
	const char *query; /* canonical (sorted, encoded) query or "" */
	const void *body;
	size_t body_len;
	const char *payload_hash; /* NULL: SHA-256 of body */
	char range[64];           /* "bytes=A-B" or "" */
	int if_none_match;
	/* response: into out_fd, else out_fixed, else rbuf */
	int out_fd;
	off_t out_fd_start;
	void *out_fixed;
	size_t out_cap;
	size_t got;
	char *rbuf;
	size_t rlen, rcap;
	long http;
	char etag[128];
	uint64_t content_length;
	int have_length;
	/* internal */
	size_t body_off;
	int local_errno;
} ulp_s3_req;

#define ULP_S3_REQ_INIT(m, k)                                        \
	{                                                            \
		.method = (m), .key = (k), .query = "", .out_fd = -1 \
	}

/* Perform with retries; 0 on 2xx, else a negative errno (s3_client.h). */
int ulp_s3_perform(struct ulp_s3 *s3, ulp_s3_req *r, ulp_s3_status *st);
const ulp_s3_config *ulp_s3_cfg(const struct ulp_s3 *s3);

#endif
