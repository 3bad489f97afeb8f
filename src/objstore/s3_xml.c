/*
 * s3_xml.c - S3's XML responses through expat: <Error>, the UploadId of
 * InitiateMultipartUpload, ListObjectsV2 pages.  Element names are matched
 * without their namespace (S3 puts everything in one default namespace).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include "objstore/s3_internal.h"

#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One walk over a document: the text of each element is handed to
 * on_end(name, text, depth) when the element closes. */
typedef struct xwalk {
	char text[2048]; /* keys are at most 1024 bytes in S3 */
	size_t tlen;
	int depth;
	int root_seen;
	char root[64];
	void (*on_end)(struct xwalk *w, const char *name);
	void *ctx;
} xwalk;

/* Truncating copy (an over-long value is cut, never overflows). */
static void copy_text(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static const char *local_name(const char *n)
{
	const char *c = strrchr(n, ' '); /* expat's "uri name" with NS on */
	return c ? c + 1 : n;
}

static void XMLCALL x_start(void *ud, const char *name, const char **attr)
{
	(void)attr;
	xwalk *w = ud;
	if (!w->root_seen) {
		w->root_seen = 1;
		copy_text(w->root, sizeof w->root, local_name(name));
	}
	w->depth++;
	w->tlen = 0;
	w->text[0] = '\0';
}

static void XMLCALL x_end(void *ud, const char *name)
{
	xwalk *w = ud;
	if (w->on_end)
		w->on_end(w, local_name(name));
	w->depth--;
	w->tlen = 0;
	w->text[0] = '\0';
}

static void XMLCALL x_text(void *ud, const char *s, int len)
{
	xwalk *w = ud;
	size_t room = sizeof w->text - 1 - w->tlen;
	size_t n = (size_t)len < room ? (size_t)len : room;
	memcpy(w->text + w->tlen, s, n);
	w->tlen += n;
	w->text[w->tlen] = '\0';
}

static int xwalk_run(xwalk *w, const char *body, size_t len)
{
	XML_Parser p = XML_ParserCreateNS(NULL, ' ');
	if (!p)
		return -ENOMEM;
	XML_SetUserData(p, w);
	XML_SetElementHandler(p, x_start, x_end);
	XML_SetCharacterDataHandler(p, x_text);
	int ok = XML_Parse(p, body, (int)len, 1) == XML_STATUS_OK;
	XML_ParserFree(p);
	return ok ? 0 : -EIO;
}

static void err_end(xwalk *w, const char *name)
{
	ulp_s3_xml_error *e = w->ctx;
	if (w->depth != 2)
		return;
	if (!strcmp(name, "Code"))
		copy_text(e->code, sizeof e->code, w->text);
	else if (!strcmp(name, "Message"))
		copy_text(e->message, sizeof e->message, w->text);
}

int ulp_s3_xml_error_parse(const char *body, size_t len, ulp_s3_xml_error *e)
{
	e->code[0] = e->message[0] = '\0';
	if (!len)
		return 0;
	xwalk w = { .on_end = err_end, .ctx = e };
	if (xwalk_run(&w, body, len) < 0)
		return 0;
	return !strcmp(w.root, "Error");
}

typedef struct idctx {
	char *id;
	size_t idlen;
	int found;
} idctx;

static void id_end(xwalk *w, const char *name)
{
	idctx *c = w->ctx;
	if (w->depth == 2 && !strcmp(name, "UploadId")) {
		copy_text(c->id, c->idlen, w->text);
		c->found = 1;
	}
}

int ulp_s3_xml_upload_id(const char *body, size_t len, char *id, size_t idlen)
{
	idctx c = { id, idlen, 0 };
	xwalk w = { .on_end = id_end, .ctx = &c };
	int rc = xwalk_run(&w, body, len);
	if (rc < 0)
		return rc;
	return c.found && id[0] ? 0 : -EIO;
}

typedef struct listctx {
	ulp_s3_list_cb cb;
	void *ctx;
	int cb_rc;
	int truncated;
	char *next;
	char key[1100];
	uint64_t size;
	int have_key;
	int bad;
} listctx;

static void list_end(xwalk *w, const char *name)
{
	listctx *c = w->ctx;
	if (w->depth == 3) {
		if (!strcmp(name, "Key")) {
			copy_text(c->key, sizeof c->key, w->text);
			c->have_key = 1;
		} else if (!strcmp(name, "Size")) {
			char *end;
			c->size = strtoull(w->text, &end, 10);
			if (end == w->text)
				c->bad = 1;
		}
	} else if (w->depth == 2) {
		if (!strcmp(name, "Contents")) {
			if (!c->have_key)
				c->bad = 1;
			else if (!c->cb_rc)
				c->cb_rc = c->cb(c->ctx, c->key, c->size);
			c->have_key = 0;
			c->size = 0;
		} else if (!strcmp(name, "IsTruncated")) {
			c->truncated = !strcmp(w->text, "true");
		} else if (!strcmp(name, "NextContinuationToken")) {
			free(c->next);
			c->next = strdup(w->text);
		}
	}
}

int ulp_s3_xml_list(const char *body, size_t len, ulp_s3_list_cb cb, void *ctx,
                    int *cb_rc, int *truncated, char **next)
{
	listctx c = { .cb = cb, .ctx = ctx };
	xwalk w = { .on_end = list_end, .ctx = &c };
	int rc = xwalk_run(&w, body, len);
	if (!rc && (c.bad || strcmp(w.root, "ListBucketResult")))
		rc = -EIO;
	if (rc < 0) {
		free(c.next);
		return rc;
	}
	*cb_rc = c.cb_rc;
	*truncated = c.truncated;
	*next = c.next;
	return 0;
}

typedef struct upctx {
	ulp_s3_upload_cb cb;
	void *ctx;
	int cb_rc;
	char key[1100];
	char id[512];
	int bad;
} upctx;

static void up_end(xwalk *w, const char *name)
{
	upctx *c = w->ctx;
	if (w->depth == 3 && !strcmp(name, "Key"))
		copy_text(c->key, sizeof c->key, w->text);
	else if (w->depth == 3 && !strcmp(name, "UploadId"))
		copy_text(c->id, sizeof c->id, w->text);
	else if (w->depth == 2 && !strcmp(name, "Upload")) {
		if (!c->key[0] || !c->id[0])
			c->bad = 1;
		else if (!c->cb_rc)
			c->cb_rc = c->cb(c->ctx, c->key, c->id);
		c->key[0] = c->id[0] = '\0';
	}
}

int ulp_s3_xml_uploads(const char *body, size_t len, ulp_s3_upload_cb cb,
                       void *ctx, int *cb_rc)
{
	upctx c = { .cb = cb, .ctx = ctx };
	xwalk w = { .on_end = up_end, .ctx = &c };
	int rc = xwalk_run(&w, body, len);
	if (!rc && (c.bad || strcmp(w.root, "ListMultipartUploadsResult")))
		rc = -EIO;
	*cb_rc = c.cb_rc;
	return rc;
}
