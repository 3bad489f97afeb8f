/*
 * s3_sign.c - AWS Signature Version 4 for S3, with OpenSSL's HMAC and
 * SHA-256.  See AWS's "Signature Version 4 signing process".
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include "objstore/s3_internal.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hexify(const unsigned char *d, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[2 * n] = '\0';
}

void ulp_s3_sha256_hex(const void *buf, size_t len, char hex[65])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	SHA256(buf, len, d);
	hexify(d, sizeof d, hex);
}

char *ulp_s3_uri_encode(const char *s, int keep_slash)
{
	static const char hx[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~' || (keep_slash && c == '/')) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hx[c >> 4];
			*o++ = hx[c & 15];
		}
	}
	*o = '\0';
	return out;
}

static void hmac(const void *key, size_t klen, const char *msg,
                 unsigned char out[32])
{
	unsigned int olen = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
	     strlen(msg), out, &olen);
}

void ulp_s3_sign(const ulp_s3_config *cfg, const char *method, const char *host,
                 const char *path, const char *query, const char *payload_hash,
                 time_t now, ulp_s3_signed *out)
{
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(out->amz_date, sizeof out->amz_date, "%Y%m%dT%H%M%SZ", &tm);
	char day[9];
	memcpy(day, out->amz_date, 8);
	day[8] = '\0';
	snprintf(out->payload_hash, sizeof out->payload_hash, "%s",
	         payload_hash);

	const char *tok = cfg->session_token;
	const char *signed_headers = tok ? "host;x-amz-content-sha256;x-amz-"
	                                   "date;x-amz-security-token"
	                                 : "host;x-amz-content-sha256;x-amz-"
	                                   "date";
	size_t cap = strlen(path) + strlen(query) + strlen(host) +
	             (tok ? strlen(tok) : 0) + 512;
	char *canon = malloc(cap);
	if (!canon) {
		out->authorization[0] = '\0';
		return;
	}
	snprintf(canon, cap,
	         "%s\n%s\n%s\nhost:%s\nx-amz-content-sha256:%s\n"
	         "x-amz-date:%s\n%s%s%s\n%s\n%s",
	         method, path, query, host, payload_hash, out->amz_date,
	         tok ? "x-amz-security-token:" : "", tok ? tok : "",
	         tok ? "\n" : "", signed_headers, payload_hash);
	char canon_hash[65];
	ulp_s3_sha256_hex(canon, strlen(canon), canon_hash);
	free(canon);

	char scope[128];
	snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", day,
	         cfg->region);
	char sts[256];
	snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", out->amz_date,
	         scope, canon_hash);

	char kinit[256];
	snprintf(kinit, sizeof kinit, "AWS4%s", cfg->secret_key);
	unsigned char k[32];
	hmac(kinit, strlen(kinit), day, k);
	hmac(k, 32, cfg->region, k);
	hmac(k, 32, "s3", k);
	hmac(k, 32, "aws4_request", k);
	unsigned char sig[32];
	hmac(k, 32, sts, sig);
	char sighex[65];
	hexify(sig, 32, sighex);
	OPENSSL_cleanse(kinit, sizeof kinit);
	OPENSSL_cleanse(k, sizeof k);

	snprintf(out->authorization, sizeof out->authorization,
	         "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, "
	         "Signature=%s",
	         cfg->access_key, scope, signed_headers, sighex);
}
