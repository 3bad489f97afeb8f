/*
 * s3_client.c - S3 requests over libcurl: addressing, one request with its
 * retries, the single-object calls and ListObjectsV2.  Multipart uploads
 * are in s3_multipart.c, signing in s3_sign.c, XML in s3_xml.c.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include "objstore/s3_req.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX 16

struct ulp_s3 {
	ulp_s3_config cfg;
	char *bucket;
	char *scheme; /* "http" or "https" */
	char *host;   /* host[:port] of the endpoint */
	pthread_mutex_t lock;
	CURL *idle[POOL_MAX]; /* kept-alive handles, reused */
	int nidle;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

const ulp_s3_config *ulp_s3_cfg(const ulp_s3 *s3)
{
	return &s3->cfg;
}
const char *ulp_s3_bucket(const ulp_s3 *s3)
{
	return s3->bucket;
}

/* S3's bucket-name rules, the part that matters for URLs and hosts. */
static int bucket_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

ulp_s3 *ulp_s3_open(const ulp_s3_config *cfg, const char *bucket, char *err,
                    size_t errlen)
{
	pthread_once(&curl_once, curl_init_once);
	if (!bucket_ok(bucket)) {
		snprintf(err, errlen,
		         "bucket name '%s': want 3-63 characters of a-z 0-9 . "
		         "-",
		         bucket);
		return NULL;
	}
	ulp_s3 *s3 = calloc(1, sizeof *s3);
	if (!s3)
		goto nomem;
	s3->cfg = *cfg;
	s3->cfg.endpoint = dup_or_null(cfg->endpoint);
	s3->cfg.region = dup_or_null(cfg->region);
	s3->cfg.access_key = dup_or_null(cfg->access_key);
	s3->cfg.secret_key = dup_or_null(cfg->secret_key);
	s3->cfg.session_token = dup_or_null(cfg->session_token);
	s3->bucket = strdup(bucket);
	const char *sep = cfg->endpoint ? strstr(cfg->endpoint, "://") : NULL;
	if (!sep) {
		snprintf(err, errlen, "S3 endpoint missing or without scheme");
		ulp_s3_close(s3);
		return NULL;
	}
	s3->scheme = strndup(cfg->endpoint, (size_t)(sep - cfg->endpoint));
	s3->host = strdup(sep + 3);
	if (!s3->cfg.endpoint || !s3->cfg.region || !s3->cfg.access_key ||
	    !s3->cfg.secret_key || !s3->bucket || !s3->scheme || !s3->host) {
		ulp_s3_close(s3);
		goto nomem;
	}
	char *slash = strchr(s3->host, '/');
	if (slash)
		*slash = '\0';
	if (s3->cfg.max_attempts < 1)
		s3->cfg.max_attempts = 1;
	if (s3->cfg.part_size < (5u << 20))
		s3->cfg.part_size = 5u << 20;
	if (s3->cfg.parts_in_flight < 1)
		s3->cfg.parts_in_flight = 1;
	pthread_mutex_init(&s3->lock, NULL);
	return s3;
nomem:
	snprintf(err, errlen, "out of memory");
	return NULL;
}

void ulp_s3_close(ulp_s3 *s3)
{
	if (!s3)
		return;
	for (int i = 0; i < s3->nidle; i++)
		curl_easy_cleanup(s3->idle[i]);
	if (s3->scheme)
		pthread_mutex_destroy(&s3->lock);
	ulp_s3_config_free(&s3->cfg);
	free(s3->bucket);
	free(s3->scheme);
	free(s3->host);
	free(s3);
}

static CURL *handle_get(ulp_s3 *s3)
{
	CURL *c = NULL;
	pthread_mutex_lock(&s3->lock);
	if (s3->nidle)
		c = s3->idle[--s3->nidle];
	pthread_mutex_unlock(&s3->lock);
	return c ? c : curl_easy_init();
}

static void handle_put(ulp_s3 *s3, CURL *c)
{
	pthread_mutex_lock(&s3->lock);
	if (s3->nidle < POOL_MAX) {
		s3->idle[s3->nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&s3->lock);
	if (c)
		curl_easy_cleanup(c);
}

/* ---------------------------------------------------------------- I/O */

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	ulp_s3_req *r = ud;
	size_t len = sz * n;
	if (r->out_fd >= 0) {
		for (size_t done = 0; done < len;) {
			ssize_t w = write(r->out_fd, p + done, len - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				r->local_errno = w < 0 ? errno : EIO;
				return 0;
			}
			done += (size_t)w;
		}
		r->got += len;
		return len;
	}
	if (r->out_fixed) {
		size_t room = r->out_cap - r->got;
		size_t k = len < room ? len : room;
		memcpy((char *)r->out_fixed + r->got, p, k);
		r->got += k;
		return len; /* surplus past the range: ignored */
	}
	if (r->rlen + len + 1 > r->rcap) {
		size_t cap = r->rcap ? r->rcap : 4096;
		while (cap < r->rlen + len + 1)
			cap *= 2;
		char *nb = realloc(r->rbuf, cap);
		if (!nb) {
			r->local_errno = ENOMEM;
			return 0;
		}
		r->rbuf = nb;
		r->rcap = cap;
	}
	memcpy(r->rbuf + r->rlen, p, len);
	r->rlen += len;
	r->rbuf[r->rlen] = '\0';
	return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	ulp_s3_req *r = ud;
	size_t len = sz * n;
	if (len > 5 && !strncasecmp(p, "ETag:", 5)) {
		const char *v = p + 5;
		while (*v == ' ')
			v++;
		size_t k = (size_t)(p + len - v);
		while (k && (v[k - 1] == '\r' || v[k - 1] == '\n'))
			k--;
		if (k >= sizeof r->etag)
			k = sizeof r->etag - 1;
		memcpy(r->etag, v, k);
		r->etag[k] = '\0';
	} else if (len > 15 && !strncasecmp(p, "Content-Length:", 15)) {
		r->content_length = strtoull(p + 15, NULL, 10);
		r->have_length = 1;
	}
	return len;
}

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
	ulp_s3_req *r = ud;
	size_t left = r->body_len - r->body_off;
	size_t k = sz * n < left ? sz * n : left;
	memcpy(p, (const char *)r->body + r->body_off, k);
	r->body_off += k;
	return k;
}

/* ---------------------------------------------------------------- one request */

static void set_status(ulp_s3_status *st, long http, const char *code,
                       const char *msg)
{
	if (!st)
		return;
	st->http = http;
	snprintf(st->code, sizeof st->code, "%s", code ? code : "");
	snprintf(st->message, sizeof st->message, "%s", msg ? msg : "");
}

const char *ulp_s3_strstatus(const ulp_s3_status *st, char *buf, size_t len)
{
	if (st->http)
		snprintf(buf, len, "HTTP %ld %s: %s", st->http, st->code,
		         st->message);
	else
		snprintf(buf, len, "%s: %s", st->code, st->message);
	return buf;
}

static int transient_http(long h)
{
	return h == 429 || (h >= 500 && h != 501);
}

static int transient_curl(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

/* The errno of a final HTTP answer (not 2xx). */
static int http_errno(long h, const char *code)
{
	if (h == 404)
		return strcmp(code, "NoSuchBucket") ? -ENOENT : -ENXIO;
	if (h == 403 || h == 401)
		return -EACCES;
	if (h == 412)
		return -EEXIST;
	if (h == 501)
		return -ENOTSUP;
	if (h == 400)
		return -EINVAL;
	return transient_http(h) ? -EAGAIN : -EIO;
}

static void backoff(int attempt)
{
	long ms = 100L << (attempt < 5 ? attempt : 5);
	if (ms > 3000)
		ms = 3000;
	ms = ms / 2 + rand() % (ms / 2 + 1); /* jitter: many writers */
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* URL and canonical path of key ("" for the bucket itself). */
static int build_target(ulp_s3 *s3, const char *key, const char *query,
                        char **url, char **canon_path, char **host)
{
	char *ek = ulp_s3_uri_encode(key, 1);
	if (!ek)
		return -ENOMEM;
	size_t n = strlen(ek) + strlen(s3->host) + strlen(s3->bucket) +
	           strlen(query) + 32;
	*url = malloc(n);
	*canon_path = malloc(n);
	*host = malloc(n);
	if (!*url || !*canon_path || !*host) {
		free(ek);
		return -ENOMEM;
	}
	if (s3->cfg.path_style) {
		snprintf(*host, n, "%s", s3->host);
		snprintf(*canon_path, n, "/%s%s%s", s3->bucket, *key ? "/" : "",
		         ek);
	} else {
		snprintf(*host, n, "%s.%s", s3->bucket, s3->host);
		snprintf(*canon_path, n, "/%s", ek);
	}
	snprintf(*url, n, "%s://%s%s%s%s", s3->scheme, *host, *canon_path,
	         *query ? "?" : "", query);
	free(ek);
	return 0;
}

static void req_reset(ulp_s3_req *r)
{
	r->rlen = 0;
	if (r->rbuf)
		r->rbuf[0] = '\0';
	r->got = 0;
	r->body_off = 0;
	r->etag[0] = '\0';
	r->have_length = 0;
	r->content_length = 0;
	r->local_errno = 0;
	if (r->out_fd >= 0) {
		/* a retried download starts over where the first began */
		if (lseek(r->out_fd, r->out_fd_start, SEEK_SET) < 0 ||
		    ftruncate(r->out_fd, r->out_fd_start) < 0)
			r->local_errno = errno;
	}
}

static CURLcode perform_once(ulp_s3 *s3, CURL *c, ulp_s3_req *r,
                             const char *url, const char *host,
                             const char *path)
{
	ulp_s3_signed sg;
	ulp_s3_sign(&s3->cfg, r->method, host, path, r->query, r->payload_hash,
	            time(NULL), &sg);
	struct curl_slist *h = NULL;
	char line[640];
	snprintf(line, sizeof line, "x-amz-date: %s", sg.amz_date);
	h = curl_slist_append(h, line);
	snprintf(line, sizeof line, "x-amz-content-sha256: %s",
	         sg.payload_hash);
	h = curl_slist_append(h, line);
	snprintf(line, sizeof line, "Authorization: %s", sg.authorization);
	h = curl_slist_append(h, line);
	if (s3->cfg.session_token) {
		size_t n = strlen(s3->cfg.session_token) + 32;
		char *t = malloc(n);
		if (t) {
			snprintf(t, n, "x-amz-security-token: %s",
			         s3->cfg.session_token);
			h = curl_slist_append(h, t);
			free(t);
		}
	}
	h = curl_slist_append(h, "Expect:");
	if (r->range[0]) {
		snprintf(line, sizeof line, "Range: %s", r->range);
		h = curl_slist_append(h, line);
	}
	if (r->if_none_match)
		h = curl_slist_append(h, "If-None-Match: *");
	if (!strcmp(r->method, "POST"))
		h = curl_slist_append(h, "Content-Type: application/xml");

	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	/* a stalled transfer (server gone) is a timeout, not a hang */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (!strcmp(r->method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, r);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
		                 (curl_off_t)r->body_len);
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS,
		                 r->body ? (const char *)r->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		                 (curl_off_t)r->body_len);
	} else if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	}
	CURLcode cc = curl_easy_perform(c);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(h);
	r->http = 0;
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->http);
	return cc;
}

int ulp_s3_perform(ulp_s3 *s3, ulp_s3_req *r, ulp_s3_status *st)
{
	char *url = NULL, *path = NULL, *host = NULL;
	int rc = build_target(s3, r->key, r->query, &url, &path, &host);
	if (rc < 0)
		goto out;
	char hash[65];
	if (!r->payload_hash) {
		ulp_s3_sha256_hex(r->body ? r->body : "", r->body_len, hash);
		r->payload_hash = hash;
	}
	CURL *c = handle_get(s3);
	if (!c) {
		rc = -ENOMEM;
		goto out;
	}
	for (int attempt = 0;; attempt++) {
		req_reset(r);
		if (r->local_errno) {
			rc = -r->local_errno;
			set_status(st, 0, "local", strerror(r->local_errno));
			break;
		}
		CURLcode cc = perform_once(s3, c, r, url, host, path);
		if (r->local_errno) {
			rc = -r->local_errno;
			set_status(st, 0, "local", strerror(r->local_errno));
			break;
		}
		if (cc == CURLE_OK && r->http >= 200 && r->http < 300) {
			rc = 0;
			break;
		}
		int again;
		if (cc != CURLE_OK) {
			set_status(st, 0, "network", curl_easy_strerror(cc));
			again = transient_curl(cc);
			rc = again ? -EAGAIN : -EIO;
		} else {
			ulp_s3_xml_error e = { "", "" };
			ulp_s3_xml_error_parse(r->rbuf, r->rlen, &e);
			if (!e.code[0])
				snprintf(e.code, sizeof e.code, "%s",
				         r->http == 404 ? "NotFound" : "Error");
			if (!e.message[0])
				snprintf(e.message, sizeof e.message,
				         "%s %s/%s", r->method, s3->bucket,
				         r->key);
			set_status(st, r->http, e.code, e.message);
			again = transient_http(r->http);
			rc = http_errno(r->http, e.code);
			/* A PUT cannot miss its key: a 404 other than
			 * NoSuchBucket is a gateway that lost track of the
			 * container (Swift under load); try again. */
			if (r->http == 404 && strcmp(e.code, "NoSuchBucket") &&
			    (!strcmp(r->method, "PUT") ||
			     !strcmp(r->method, "POST"))) {
				again = 1;
				rc = -EAGAIN;
			}
		}
		if (!again || attempt + 1 >= s3->cfg.max_attempts)
			break;
		backoff(attempt);
	}
	handle_put(s3, c);
out:
	free(url);
	free(path);
	free(host);
	return rc;
}

/* ---------------------------------------------------------------- the calls */

int ulp_s3_put(ulp_s3 *s3, const char *key, const void *buf, size_t len,
               unsigned flags, ulp_s3_status *st)
{
	ulp_s3_req r = ULP_S3_REQ_INIT("PUT", key);
	r.body = buf;
	r.body_len = len;
	r.if_none_match = !!(flags & ULP_S3_IF_NONE_MATCH);
	int rc = ulp_s3_perform(s3, &r, st);
	free(r.rbuf);
	return rc;
}

int ulp_s3_get_range(ulp_s3 *s3, const char *key, uint64_t off, size_t len,
                     void *buf, size_t *got, ulp_s3_status *st)
{
	if (!len)
		return -EINVAL;
	ulp_s3_req r = ULP_S3_REQ_INIT("GET", key);
	snprintf(r.range, sizeof r.range, "bytes=%llu-%llu",
	         (unsigned long long)off, (unsigned long long)(off + len - 1));
	r.out_fixed = buf;
	r.out_cap = len;
	int rc = ulp_s3_perform(s3, &r, st);
	if (rc == 0 && r.http != 206 && off) {
		/* a server that ignored Range sent the object from byte 0 */
		set_status(st, r.http, "NoRange", "server ignored Range");
		rc = -EIO;
	}
	*got = rc ? 0 : r.got;
	free(r.rbuf);
	return rc;
}

int ulp_s3_get(ulp_s3 *s3, const char *key, void **buf, size_t *len,
               ulp_s3_status *st)
{
	ulp_s3_req r = ULP_S3_REQ_INIT("GET", key);
	int rc = ulp_s3_perform(s3, &r, st);
	if (rc) {
		free(r.rbuf);
		return rc;
	}
	if (!r.rbuf) /* empty object */
		r.rbuf = calloc(1, 1);
	if (!r.rbuf)
		return -ENOMEM;
	*buf = r.rbuf;
	*len = r.rlen;
	return 0;
}

int ulp_s3_get_fd(ulp_s3 *s3, const char *key, int fd, uint64_t *len,
                  ulp_s3_status *st)
{
	ulp_s3_req r = ULP_S3_REQ_INIT("GET", key);
	r.out_fd = fd;
	off_t start = lseek(fd, 0, SEEK_CUR);
	if (start < 0)
		return -errno;
	r.out_fd_start = start;
	int rc = ulp_s3_perform(s3, &r, st);
	if (!rc && r.have_length && r.got != r.content_length) {
		set_status(st, r.http, "Truncated", "short body");
		rc = -EIO;
	}
	if (len)
		*len = r.got;
	free(r.rbuf);
	return rc;
}

int ulp_s3_head(ulp_s3 *s3, const char *key, uint64_t *size, ulp_s3_status *st)
{
	ulp_s3_req r = ULP_S3_REQ_INIT("HEAD", key);
	int rc = ulp_s3_perform(s3, &r, st);
	if (!rc && size)
		*size = r.content_length;
	free(r.rbuf);
	return rc;
}

int ulp_s3_delete(ulp_s3 *s3, const char *key, ulp_s3_status *st)
{
	ulp_s3_req r = ULP_S3_REQ_INIT("DELETE", key);
	int rc = ulp_s3_perform(s3, &r, st);
	free(r.rbuf);
	return rc == -ENOENT ? 0 : rc;
}

int ulp_s3_list(ulp_s3 *s3, const char *prefix, ulp_s3_list_cb cb, void *ctx,
                ulp_s3_status *st)
{
	char *token = NULL;
	char *ep = ulp_s3_uri_encode(prefix, 0);
	if (!ep)
		return -ENOMEM;
	int rc = 0;
	for (;;) {
		char *et = token ? ulp_s3_uri_encode(token, 0) : NULL;
		size_t n = strlen(ep) + (et ? strlen(et) : 0) + 64;
		char *q = malloc(n);
		if (!q || (token && !et)) {
			free(q);
			free(et);
			rc = -ENOMEM;
			break;
		}
		/* canonical order: continuation-token < list-type < prefix */
		snprintf(q, n, "%s%s%slist-type=2&prefix=%s",
		         et ? "continuation-token=" : "", et ? et : "",
		         et ? "&" : "", ep);
		free(et);
		ulp_s3_req r = ULP_S3_REQ_INIT("GET", "");
		r.query = q;
		rc = ulp_s3_perform(s3, &r, st);
		int cb_rc = 0, truncated = 0;
		char *next = NULL;
		if (!rc) {
			rc = ulp_s3_xml_list(r.rbuf ? r.rbuf : "", r.rlen, cb,
			                     ctx, &cb_rc, &truncated, &next);
			if (rc)
				set_status(st, r.http, "BadXML",
				           "malformed ListObjectsV2 answer");
		}
		free(r.rbuf);
		free(q);
		free(token);
		token = next;
		if (rc)
			break;
		if (cb_rc) {
			rc = cb_rc;
			break;
		}
		if (!truncated || !token)
			break;
	}
	free(token);
	free(ep);
	return rc;
}
