/*
 * s3_client.h - a small S3 client: SigV4 (OpenSSL), HTTP (libcurl), XML
 * responses (expat).  Enough of the API for ulpfs's object files and
 * catalog snapshots: PUT (single or multipart with several parts in
 * flight), GET (whole or ranged), HEAD, DELETE, ListObjectsV2.
 *
 * Calls are thread-safe: idle connections are pooled and reused.  Transient
 * failures (connection errors, timeouts, 5xx except 501, 429) are retried
 * with exponential backoff up to cfg.max_attempts; what is left after that
 * is returned to the caller, who may retry later (the upload queue does).
 *
 * Return values: 0, or a negative errno: -ENOENT (404 NoSuchKey),
 * -ENXIO (NoSuchBucket), -EACCES (403: wrong credentials or no right),
 * -ENOTSUP (501: the server does not implement a feature, e.g. Swift and
 * conditional PUTs), -EEXIST (412: If-None-Match failed), -EAGAIN
 * (transient failure after every retry), -EINVAL, -ENOMEM, -EIO (other).
 * Every failure fills *st (when given) with the HTTP status, S3's error
 * code and a sentence fit for a log.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_S3_CLIENT_H
#define ULP_S3_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Where and as whom: ulp_s3_config_load fills it from the environment and
 * ~/.aws, in the order the AWS tools use. */
typedef struct ulp_s3_config {
	char *endpoint; /* scheme://host[:port], no trailing slash */
	char *region;   /* us-east-1 when nothing says otherwise */
	char *access_key;
	char *secret_key;
	char *session_token; /* NULL unless temporary credentials */
	int path_style;      /* 1: https://host/bucket/key; 0: bucket.host */
	int max_attempts;    /* per request, transient failures included */
	size_t part_size;    /* multipart part size (>= 5 MiB) */
	size_t multipart_threshold; /* PUTs of files above this are multipart */
	int parts_in_flight;        /* parallel part uploads per object */
} ulp_s3_config;

/* What went wrong with the last failed request of a call. */
typedef struct ulp_s3_status {
	long http;         /* HTTP status, 0 when no response came */
	char code[64];     /* S3's <Code>, or a curl error name */
	char message[256]; /* a sentence for the log */
} ulp_s3_status;

/*
 * Environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 * AWS_REGION (or AWS_DEFAULT_REGION), AWS_ENDPOINT_URL, AWS_PROFILE;
 * otherwise the profile's entries of AWS_SHARED_CREDENTIALS_FILE
 * (~/.aws/credentials) and AWS_CONFIG_FILE (~/.aws/config): aws_access_key_id,
 * aws_secret_access_key, aws_session_token, region, endpoint_url,
 * addressing_style.  ULPFS_S3_ADDRESSING=path|virtual overrides the style;
 * the default is virtual-hosted for AWS's own endpoint and path-style for
 * any other (MinIO, Swift, RGW).  Plain http is accepted for loopback
 * endpoints only; https always checks certificates.
 * Returns 0 or -EINVAL with err filled.
 */
int ulp_s3_config_load(ulp_s3_config *cfg, char *err, size_t errlen);
void ulp_s3_config_free(ulp_s3_config *cfg);

typedef struct ulp_s3 ulp_s3;

/* A client for one bucket.  Copies cfg.  NULL (err filled) on bad input. */
ulp_s3 *ulp_s3_open(const ulp_s3_config *cfg, const char *bucket, char *err,
                    size_t errlen);
void ulp_s3_close(ulp_s3 *s3);
const char *ulp_s3_bucket(const ulp_s3 *s3);

/* ulp_s3_put flags */
enum {
	ULP_S3_IF_NONE_MATCH = 1, /* If-None-Match: *  (create only) */
};

int ulp_s3_put(ulp_s3 *s3, const char *key, const void *buf, size_t len,
               unsigned flags, ulp_s3_status *st);
/* The first size bytes of fd; multipart above cfg.multipart_threshold. */
int ulp_s3_put_fd(ulp_s3 *s3, const char *key, int fd, uint64_t size,
                  ulp_s3_status *st);
/* Bytes [off, off+len) into buf; *got is what came (short at the end of the
 * object).  len 0 is refused. */
int ulp_s3_get_range(ulp_s3 *s3, const char *key, uint64_t off, size_t len,
                     void *buf, size_t *got, ulp_s3_status *st);
/* The whole object, malloc'ed into *buf. */
int ulp_s3_get(ulp_s3 *s3, const char *key, void **buf, size_t *len,
               ulp_s3_status *st);
/* The whole object written to fd from its current offset. */
int ulp_s3_get_fd(ulp_s3 *s3, const char *key, int fd, uint64_t *len,
                  ulp_s3_status *st);
int ulp_s3_head(ulp_s3 *s3, const char *key, uint64_t *size, ulp_s3_status *st);
/* Deleting a missing key succeeds (S3's semantics). */
int ulp_s3_delete(ulp_s3 *s3, const char *key, ulp_s3_status *st);

/* Every key under prefix, in order; cb returning non-zero stops the
 * listing and is returned. */
typedef int (*ulp_s3_list_cb)(void *ctx, const char *key, uint64_t size);
int ulp_s3_list(ulp_s3 *s3, const char *prefix, ulp_s3_list_cb cb, void *ctx,
                ulp_s3_status *st);

/* Multipart uploads begun under prefix and neither completed nor aborted
 * (a writer killed mid-upload leaves their parts stored): cb per upload,
 * then abort with ulp_s3_abort_upload.  The first 1000 only; call again
 * after aborting. */
typedef int (*ulp_s3_upload_cb)(void *ctx, const char *key,
                                const char *upload_id);
int ulp_s3_list_uploads(ulp_s3 *s3, const char *prefix, ulp_s3_upload_cb cb,
                        void *ctx, ulp_s3_status *st);
int ulp_s3_abort_upload(ulp_s3 *s3, const char *key, const char *upload_id,
                        ulp_s3_status *st);

/* "403 InvalidAccessKeyId: ..." into buf, for logs and error messages. */
const char *ulp_s3_strstatus(const ulp_s3_status *st, char *buf, size_t len);

#endif
