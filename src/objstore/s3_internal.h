/*
 * s3_internal.h - what the S3 client's files share: SigV4 signing
 * (s3_sign.c) and the XML responses (s3_xml.c).  Not for other modules.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_S3_INTERNAL_H
#define ULP_S3_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "objstore/s3_client.h"

/* RFC 3986 percent-encoding as SigV4 wants it: unreserved characters stay,
 * '/' stays when keep_slash.  Returns a malloc'ed string or NULL. */
char *ulp_s3_uri_encode(const char *s, int keep_slash);

/* Lower-case hex SHA-256 of buf into hex[65]. */
void ulp_s3_sha256_hex(const void *buf, size_t len, char hex[65]);

/* A signed request's headers, ready for curl. */
typedef struct ulp_s3_signed {
	char amz_date[17]; /* 20260101T000000Z */
	char payload_hash[65];
	char authorization[512];
} ulp_s3_signed;

/*
 * Sign method host path query (canonical: already URI-encoded path, query
 * with sorted, encoded pairs or "") for the given payload hash at time now.
 * The signed headers are host, x-amz-content-sha256, x-amz-date and, with
 * a session token, x-amz-security-token.
 */
void ulp_s3_sign(const ulp_s3_config *cfg, const char *method, const char *host,
                 const char *path, const char *query, const char *payload_hash,
                 time_t now, ulp_s3_signed *out);

/* Parsed XML responses.  Each returns 0 or -EIO on malformed XML. */
typedef struct ulp_s3_xml_error {
	char code[64];
	char message[256];
} ulp_s3_xml_error;
/* 1 when body is an <Error> document (CompleteMultipartUpload may answer
 * 200 with one), 0 otherwise. */
int ulp_s3_xml_error_parse(const char *body, size_t len, ulp_s3_xml_error *e);
int ulp_s3_xml_upload_id(const char *body, size_t len, char *id, size_t idlen);
/* ListObjectsV2: cb per <Contents>; *truncated and next (continuation
 * token, malloc'ed or NULL) for the next page. */
int ulp_s3_xml_list(const char *body, size_t len, ulp_s3_list_cb cb, void *ctx,
                    int *cb_rc, int *truncated, char **next);

/* ListMultipartUploads: cb per <Upload>. */
int ulp_s3_xml_uploads(const char *body, size_t len, ulp_s3_upload_cb cb,
                       void *ctx, int *cb_rc);

#endif
