/*
 * s3_multipart.c - PUT of a file: one request up to the multipart
 * threshold, else a multipart upload whose parts (cfg.part_size each) go up
 * cfg.parts_in_flight at a time, each read with pread and hashed on its
 * own.  A failed upload is aborted so that no parts linger in the bucket.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include "objstore/s3_req.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
		                  (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file shrank under us */
		done += (size_t)n;
	}
	return 0;
}

typedef struct mp {
	ulp_s3 *s3;
	const char *key;
	int fd;
	uint64_t size;
	size_t part_size;
	unsigned nparts;
	char upload_id[256];
	pthread_mutex_t lock;
	unsigned next; /* next part to take (0-based) */
	int rc;        /* first failure */
	ulp_s3_status st;
	char (*etags)[128];
} mp;

static void *part_worker(void *arg)
{
	mp *m = arg;
	void *buf = malloc(m->part_size);
	for (;;) {
		pthread_mutex_lock(&m->lock);
		unsigned i = m->next++;
		int stop = m->rc || i >= m->nparts || !buf;
		if (!buf && !m->rc)
			m->rc = -ENOMEM;
		pthread_mutex_unlock(&m->lock);
		if (stop)
			break;
		uint64_t off = (uint64_t)i * m->part_size;
		size_t len = m->size - off < m->part_size
		                     ? (size_t)(m->size - off)
		                     : m->part_size;
		int rc = read_full(m->fd, buf, len, off);
		ulp_s3_status st = { 0, "", "" };
		char q[400];
		/* canonical order: partNumber < uploadId */
		snprintf(q, sizeof q, "partNumber=%u&uploadId=%s", i + 1,
		         m->upload_id);
		ulp_s3_req r = ULP_S3_REQ_INIT("PUT", m->key);
		r.query = q;
		r.body = buf;
		r.body_len = len;
		if (!rc)
			rc = ulp_s3_perform(m->s3, &r, &st);
		else
			snprintf(st.message, sizeof st.message,
			         "reading the file: %s", strerror(-rc));
		if (!rc && !r.etag[0]) {
			rc = -EIO;
			snprintf(st.message, sizeof st.message,
			         "part %u: no ETag in the answer", i + 1);
		}
		pthread_mutex_lock(&m->lock);
		if (rc && !m->rc) {
			m->rc = rc;
			m->st = st;
		} else if (!rc) {
			memcpy(m->etags[i], r.etag, sizeof r.etag);
		}
		pthread_mutex_unlock(&m->lock);
		free(r.rbuf);
	}
	free(buf);
	return NULL;
}

/* <CompleteMultipartUpload> naming every part: integers and the ETags the
 * server gave, which are quoted hex (no XML metacharacters but quotes,
 * which text content may hold). */
static char *complete_body(const mp *m, size_t *len)
{
	size_t cap = 128 + (size_t)m->nparts * 200, n = 0;
	char *b = malloc(cap);
	if (!b)
		return NULL;
	n += (size_t)snprintf(b + n, cap - n, "<CompleteMultipartUpload>");
	for (unsigned i = 0; i < m->nparts; i++)
		n += (size_t)snprintf(b + n, cap - n,
		                      "<Part><PartNumber>%u</PartNumber>"
		                      "<ETag>%s</ETag></Part>",
		                      i + 1, m->etags[i]);
	n += (size_t)snprintf(b + n, cap - n, "</CompleteMultipartUpload>");
	*len = n;
	return b;
}

static int etag_ok(const char *e)
{
	for (; *e; e++)
		if (*e == '<' || *e == '>' || *e == '&')
			return 0;
	return 1;
}

static int multipart(ulp_s3 *s3, const char *key, int fd, uint64_t size,
                     ulp_s3_status *st)
{
	const ulp_s3_config *cfg = ulp_s3_cfg(s3);
	mp m = { .s3 = s3,
		 .key = key,
		 .fd = fd,
		 .size = size,
		 .part_size = cfg->part_size };
	m.nparts = (unsigned)((size + m.part_size - 1) / m.part_size);
	if (m.nparts > 10000)
		return -EFBIG;
	m.etags = calloc(m.nparts, sizeof *m.etags);
	if (!m.etags)
		return -ENOMEM;

	ulp_s3_req r = ULP_S3_REQ_INIT("POST", key);
	r.query = "uploads=";
	int rc = ulp_s3_perform(s3, &r, st);
	if (!rc && ulp_s3_xml_upload_id(r.rbuf ? r.rbuf : "", r.rlen,
	                                m.upload_id, sizeof m.upload_id)) {
		rc = -EIO;
		snprintf(st->message, sizeof st->message,
		         "InitiateMultipartUpload: no UploadId");
	}
	free(r.rbuf);
	if (rc) {
		free(m.etags);
		return rc;
	}
	/* the upload id goes into a query string unencoded: check it */
	char *eid = ulp_s3_uri_encode(m.upload_id, 0);
	if (!eid || strlen(eid) >= sizeof m.upload_id) {
		free(eid);
		free(m.etags);
		return -EIO;
	}
	snprintf(m.upload_id, sizeof m.upload_id, "%s", eid);
	free(eid);

	pthread_mutex_init(&m.lock, NULL);
	int nth = cfg->parts_in_flight;
	if ((unsigned)nth > m.nparts)
		nth = (int)m.nparts;
	pthread_t th[64];
	if (nth > 64)
		nth = 64;
	int started = 0;
	for (; started < nth; started++)
		if (pthread_create(&th[started], NULL, part_worker, &m))
			break;
	if (!started)
		part_worker(&m);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&m.lock);
	rc = m.rc;
	if (rc && st)
		*st = m.st;

	char q[300];
	snprintf(q, sizeof q, "uploadId=%s", m.upload_id);
	if (!rc) {
		for (unsigned i = 0; i < m.nparts && !rc; i++)
			if (!etag_ok(m.etags[i]))
				rc = -EIO;
		size_t blen = 0;
		char *body = rc ? NULL : complete_body(&m, &blen);
		if (!rc && !body)
			rc = -ENOMEM;
		if (!rc) {
			ulp_s3_req c = ULP_S3_REQ_INIT("POST", key);
			c.query = q;
			c.body = body;
			c.body_len = blen;
			rc = ulp_s3_perform(s3, &c, st);
			ulp_s3_xml_error e;
			/* S3 may answer 200 and put the failure in the body */
			if (!rc && ulp_s3_xml_error_parse(c.rbuf, c.rlen, &e)) {
				rc = -EIO;
				if (st) {
					st->http = c.http;
					snprintf(st->code, sizeof st->code,
					         "%s", e.code);
					snprintf(st->message,
					         sizeof st->message, "%s",
					         e.message);
				}
			}
			free(c.rbuf);
		}
		free(body);
	}
	if (rc) {
		ulp_s3_req a = ULP_S3_REQ_INIT("DELETE", key);
		a.query = q;
		ulp_s3_status ignore;
		ulp_s3_perform(s3, &a, &ignore);
		free(a.rbuf);
	}
	free(m.etags);
	return rc;
}

int ulp_s3_put_fd(ulp_s3 *s3, const char *key, int fd, uint64_t size,
                  ulp_s3_status *st)
{
	ulp_s3_status local;
	if (!st)
		st = &local;
	memset(st, 0, sizeof *st);
	if (size > ulp_s3_cfg(s3)->multipart_threshold)
		return multipart(s3, key, fd, size, st);
	void *buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	int rc = read_full(fd, buf, (size_t)size, 0);
	if (!rc)
		rc = ulp_s3_put(s3, key, buf, (size_t)size, 0, st);
	free(buf);
	return rc;
}

int ulp_s3_list_uploads(ulp_s3 *s3, const char *prefix, ulp_s3_upload_cb cb,
                        void *ctx, ulp_s3_status *st)
{
	char *ep = ulp_s3_uri_encode(prefix, 0);
	if (!ep)
		return -ENOMEM;
	size_t n = strlen(ep) + 32;
	char *q = malloc(n);
	if (!q) {
		free(ep);
		return -ENOMEM;
	}
	/* canonical order: prefix < uploads */
	snprintf(q, n, "prefix=%s&uploads=", ep);
	free(ep);
	ulp_s3_req r = ULP_S3_REQ_INIT("GET", "");
	r.query = q;
	int rc = ulp_s3_perform(s3, &r, st);
	int cb_rc = 0;
	if (!rc)
		rc = ulp_s3_xml_uploads(r.rbuf ? r.rbuf : "", r.rlen, cb, ctx,
		                        &cb_rc);
	free(r.rbuf);
	free(q);
	return rc ? rc : cb_rc;
}

int ulp_s3_abort_upload(ulp_s3 *s3, const char *key, const char *upload_id,
                        ulp_s3_status *st)
{
	char *eid = ulp_s3_uri_encode(upload_id, 0);
	if (!eid)
		return -ENOMEM;
	size_t n = strlen(eid) + 16;
	char *q = malloc(n);
	if (!q) {
		free(eid);
		return -ENOMEM;
	}
	snprintf(q, n, "uploadId=%s", eid);
	free(eid);
	ulp_s3_req r = ULP_S3_REQ_INIT("DELETE", key);
	r.query = q;
	int rc = ulp_s3_perform(s3, &r, st);
	free(r.rbuf);
	free(q);
	return rc == -ENOENT ? 0 : rc;
}
