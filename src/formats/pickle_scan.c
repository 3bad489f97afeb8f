/*
 * pickle_scan.c - a pickle opcode walker that recognises torch storage
 * persistent ids.  Nothing is executed or imported: values the scanner does
 * not need are opaque placeholders, so any stream the Python unpickler
 * accepts is walked with the same stack shape, and streams it would reject
 * for structural reasons (truncation, underflow, missing memo) are
 * rejected here too.
 */
#include <stdlib.h>
#include <string.h>

#include "formats/formats_internal.h"
#include "formats/pickle_scan.h"

/* Limits far above what torch writes (about ten memo entries per tensor,
 * nesting of a handful of levels).  They cap what hostile input can make
 * the scanner hold at about 40 MiB of stack and 96 MiB of memo, and a
 * stream needs about a byte per entry to get there. */
#define PS_MAX_STACK (1u << 20)
#define PS_MAX_MARKS (1u << 16)
#define PS_MAX_MEMO (1u << 20)
#define PS_MAX_KEY 1024
#define PS_HIGHEST_PROTOCOL 5

enum { PV_OPAQUE, PV_STR, PV_INT, PV_GLOBAL, PV_PID };

/* PV_STR: a.  PV_INT: i.  PV_GLOBAL: a = module, b = name.
 * PV_PID: a = storage class name, b = key, i = numel when has_i. */
typedef struct pv {
	const uint8_t *a, *b;
	int64_t i;
	uint32_t alen, blen;
	uint8_t kind, has_i;
} pv;

typedef struct memo_slot {
	uint32_t key1; /* memo index + 1; 0 marks an empty slot */
	pv v;
} memo_slot;

typedef struct ps {
	const uint8_t *p;
	size_t len, pos;
	pv *stack;
	size_t nstack, capstack;
	size_t *marks;
	size_t nmarks, capmarks;
	memo_slot *memo;
	size_t nmemo, capmemo; /* capmemo: 0 or a power of two */
	ulp_pickle_scan *out;
	size_t capout;
} ps;

/* Room for want elements in buf (capacity *cap), doubling up to limit.
 * Returns the buffer to keep (the old one on failure) and sets *rc to
 * ULP_OK, ULP_ERR_PARSE past the limit, or ULP_ERR_NOMEM. */
static void *grow(void *buf, size_t *cap, size_t elem, size_t want,
                  size_t limit, int *rc)
{
	size_t ncap;
	void *nb;

	*rc = ULP_OK;
	if (want <= *cap)
		return buf;
	if (want > limit) {
		*rc = ULP_ERR_PARSE;
		return buf;
	}
	ncap = *cap ? *cap * 2 : 64;
	if (ncap > limit)
		ncap = limit;
	nb = realloc(buf, ncap * elem);
	if (!nb) {
		*rc = ULP_ERR_NOMEM;
		return buf;
	}
	*cap = ncap;
	return nb;
}

/* ------------------------------------------------------------- the stack */

static size_t ps_base(const ps *s)
{
	return s->nmarks ? s->marks[s->nmarks - 1] : 0;
}

static int ps_push(ps *s, pv v)
{
	int rc;

	s->stack = grow(s->stack, &s->capstack, sizeof *s->stack, s->nstack + 1,
	                PS_MAX_STACK, &rc);
	if (rc != ULP_OK)
		return rc;
	s->stack[s->nstack++] = v;
	return ULP_OK;
}

static int ps_push_opaque(ps *s)
{
	pv v = { .kind = PV_OPAQUE };

	return ps_push(s, v);
}

/* Python's unpickler cannot see below the innermost MARK either. */
static int ps_pop(ps *s, pv *v)
{
	if (s->nstack == ps_base(s))
		return ULP_ERR_PARSE;
	s->nstack--;
	if (v)
		*v = s->stack[s->nstack];
	return ULP_OK;
}

static pv *ps_top(ps *s)
{
	return s->nstack == ps_base(s) ? NULL : &s->stack[s->nstack - 1];
}

static int ps_mark(ps *s)
{
	int rc;

	s->marks = grow(s->marks, &s->capmarks, sizeof *s->marks, s->nmarks + 1,
	                PS_MAX_MARKS, &rc);
	if (rc != ULP_OK)
		return rc;
	s->marks[s->nmarks++] = s->nstack;
	return ULP_OK;
}

/* Drop the innermost MARK; the items above it stay at stack[*base..nstack)
 * for the caller to consume. */
static int ps_pop_mark(ps *s, size_t *base)
{
	if (s->nmarks == 0)
		return ULP_ERR_PARSE;
	*base = s->marks[--s->nmarks];
	return ULP_OK;
}

/* -------------------------------------------------------------- the memo */

static size_t memo_find(const ps *s, uint32_t idx)
{
	size_t mask = s->capmemo - 1;
	size_t h = ((uint64_t)idx * 0x9E3779B97F4A7C15ull) >> 32 & mask;

	while (s->memo[h].key1 && s->memo[h].key1 - 1 != idx)
		h = (h + 1) & mask;
	return h;
}

static int memo_rehash(ps *s)
{
	size_t ncap = s->capmemo ? s->capmemo * 2 : 256;
	memo_slot *old = s->memo;
	size_t ocap = s->capmemo;

	s->memo = calloc(ncap, sizeof *s->memo);
	if (!s->memo) {
		s->memo = old;
		return ULP_ERR_NOMEM;
	}
	s->capmemo = ncap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].key1)
			s->memo[memo_find(s, old[i].key1 - 1)] = old[i];
	free(old);
	return ULP_OK;
}

static int memo_put(ps *s, uint64_t idx, const pv *v)
{
	size_t h;
	int rc;

	/* Indices are at most 32 bits in every put opcode; an index that
	 * cannot be stored is no valid stream anyone wrote. */
	if (idx >= UINT32_MAX)
		return ULP_ERR_PARSE;
	if ((s->nmemo + 1) * 2 > s->capmemo) {
		if (s->nmemo >= PS_MAX_MEMO)
			return ULP_ERR_PARSE;
		rc = memo_rehash(s);
		if (rc != ULP_OK)
			return rc;
	}
	h = memo_find(s, (uint32_t)idx);
	if (!s->memo[h].key1) {
		s->memo[h].key1 = (uint32_t)idx + 1;
		s->nmemo++;
	}
	s->memo[h].v = *v;
	return ULP_OK;
}

static int memo_get(ps *s, uint64_t idx)
{
	size_t h;

	if (idx >= UINT32_MAX || s->capmemo == 0)
		return ULP_ERR_PARSE;
	h = memo_find(s, (uint32_t)idx);
	if (!s->memo[h].key1)
		return ULP_ERR_PARSE;
	return ps_push(s, s->memo[h].v);
}

static int memo_put_top(ps *s, uint64_t idx)
{
	const pv *t = ps_top(s);

	return t ? memo_put(s, idx, t) : ULP_ERR_PARSE;
}

/* --------------------------------------------------------- argument reads */

static int arg(ps *s, size_t n, const uint8_t **p)
{
	if (s->len - s->pos < n)
		return ULP_ERR_PARSE;
	*p = s->p + s->pos;
	s->pos += n;
	return ULP_OK;
}

static int arg_uint(ps *s, size_t n, uint64_t *v)
{
	const uint8_t *p;
	int rc = arg(s, n, &p);

	if (rc != ULP_OK)
		return rc;
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v |= (uint64_t)p[i] << (8 * i);
	return ULP_OK;
}

/* A newline-terminated argument, newline excluded. */
static int arg_line(ps *s, const uint8_t **p, size_t *n)
{
	const uint8_t *nl = memchr(s->p + s->pos, '\n', s->len - s->pos);

	if (!nl)
		return ULP_ERR_PARSE;
	*p = s->p + s->pos;
	*n = (size_t)(nl - *p);
	s->pos += *n + 1;
	return ULP_OK;
}

/* A length-prefixed byte run of prefix bytes; with is_signed, a negative
 * length is an error as in Python. */
static int arg_counted(ps *s, size_t prefix, int is_signed, const uint8_t **p,
                       uint64_t *n)
{
	int rc = arg_uint(s, prefix, n);

	if (rc != ULP_OK)
		return rc;
	if (is_signed && (*n >> (8 * prefix - 1)) & 1)
		return ULP_ERR_PARSE;
	if (*n > s->len - s->pos)
		return ULP_ERR_PARSE;
	return arg(s, (size_t)*n, p);
}

/* Decimal digits only: what the pickler writes for GET/PUT/INT.  Returns 1
 * when p[0..n) is such a number fitting 63 bits (with optional '-'). */
static int parse_dec(const uint8_t *p, size_t n, int64_t *v)
{
	int neg = n > 0 && p[0] == '-';
	uint64_t acc = 0;

	if (neg) {
		p++;
		n--;
	}
	if (n == 0 || n > 18)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 0;
		acc = acc * 10 + (p[i] - '0');
	}
	*v = neg ? -(int64_t)acc : (int64_t)acc;
	return 1;
}

/* ------------------------------------------------------------ value makers */

static int push_str(ps *s, const uint8_t *p, uint64_t n)
{
	pv v = { .kind = PV_STR, .a = p, .alen = (uint32_t)n };

	if (n > UINT32_MAX)
		v.kind = PV_OPAQUE;
	return ps_push(s, v);
}

static int push_int(ps *s, int64_t i)
{
	pv v = { .kind = PV_INT, .i = i };

	return ps_push(s, v);
}

/* Little-endian two's complement, as LONG1/LONG4 carry it. */
static int push_long(ps *s, const uint8_t *p, uint64_t n)
{
	uint64_t u = 0;

	if (n > 8)
		return ps_push_opaque(s);
	for (uint64_t i = 0; i < n; i++)
		u |= (uint64_t)p[i] << (8 * i);
	if (n > 0 && n < 8 && (p[n - 1] & 0x80))
		u |= ~0ull << (8 * n);
	return push_int(s, (int64_t)u);
}

static int push_global(ps *s, const uint8_t *mod, size_t modlen,
                       const uint8_t *name, size_t namelen)
{
	pv v = { .kind = PV_GLOBAL,
		 .a = mod,
		 .alen = (uint32_t)modlen,
		 .b = name,
		 .blen = (uint32_t)namelen };

	if (modlen > UINT32_MAX || namelen > UINT32_MAX)
		v.kind = PV_OPAQUE;
	return ps_push(s, v);
}

static int str_is(const uint8_t *p, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* ('storage', torch.<T>Storage, key, location, numel) */
static pv make_tuple(const pv *it, size_t n)
{
	pv v = { .kind = PV_OPAQUE };
	const size_t suf = strlen("Storage");

	if (n != 5 || it[0].kind != PV_STR ||
	    !str_is(it[0].a, it[0].alen, "storage") ||
	    it[1].kind != PV_GLOBAL || !str_is(it[1].a, it[1].alen, "torch") ||
	    it[1].blen <= suf || it[1].blen - suf >= ULP_PICKLE_TYPE_MAX ||
	    memcmp(it[1].b + it[1].blen - suf, "Storage", suf) != 0 ||
	    it[2].kind != PV_STR || it[2].alen > PS_MAX_KEY)
		return v;
	v.kind = PV_PID;
	v.a = it[1].b;
	v.alen = it[1].blen - (uint32_t)suf;
	v.b = it[2].a;
	v.blen = it[2].alen;
	v.has_i = it[4].kind == PV_INT;
	v.i = it[4].i;
	return v;
}

static int record_pid(ps *s, const pv *v)
{
	ulp_pickle_storage *r;
	int rc;

	/* One record per BINPERSID byte at most: the input bounds it. */
	s->out->v = grow(s->out->v, &s->capout, sizeof *s->out->v,
	                 s->out->n + 1, SIZE_MAX / sizeof *s->out->v, &rc);
	if (rc != ULP_OK)
		return rc;
	r = &s->out->v[s->out->n++];
	memset(r, 0, sizeof *r);
	r->key = v->b;
	r->key_len = v->blen;
	memcpy(r->type, v->a, v->alen);
	r->type[v->alen] = '\0';
	r->has_numel = v->has_i;
	r->numel = v->i;
	return ULP_OK;
}

/* ------------------------------------------------------------- opcodes */

/* Pop values (never across a MARK).  Then, with into_top, the object they
 * went into must be on top and becomes opaque (APPEND, SETITEM, REDUCE,
 * BUILD); otherwise one opaque result is pushed (TUPLEn, NEWOBJ). */
static int reduce_n(ps *s, size_t pop, int into_top)
{
	for (size_t i = 0; i < pop; i++)
		if (ps_pop(s, NULL) != ULP_OK)
			return ULP_ERR_PARSE;
	if (into_top) {
		pv *t = ps_top(s);

		if (!t)
			return ULP_ERR_PARSE;
		t->kind = PV_OPAQUE;
		return ULP_OK;
	}
	return ps_push_opaque(s);
}

/* Consume a MARK and the items above it, at least min_items, in pairs
 * with items_even (as Python indexes them).  MK_INTO: the items go into the
 * object below the mark, which must exist (APPENDS, SETITEMS, ADDITEMS).
 * MK_PUSH: one opaque result is pushed.  MK_TUPLE: the tuple model. */
enum { MK_PUSH, MK_INTO, MK_TUPLE };

static int by_mark(ps *s, int mode, int items_even, int min_items)
{
	size_t base, n;
	pv t = { .kind = PV_OPAQUE };

	if (ps_pop_mark(s, &base) != ULP_OK)
		return ULP_ERR_PARSE;
	n = s->nstack - base;
	if ((items_even && n % 2) || n < (size_t)min_items)
		return ULP_ERR_PARSE;
	if (mode == MK_TUPLE && n > 0)
		t = make_tuple(&s->stack[base], n);
	s->nstack = base;
	if (mode == MK_INTO)
		return ps_top(s) ? ULP_OK : ULP_ERR_PARSE;
	if (mode == MK_TUPLE)
		return ps_push(s, t);
	return ps_push_opaque(s);
}

static int op_text_int(ps *s, int is_long)
{
	const uint8_t *p;
	size_t n;
	int64_t v;
	int rc = arg_line(s, &p, &n);

	if (rc != ULP_OK)
		return rc;
	if (is_long && n > 0 && p[n - 1] == 'L')
		n--;
	/* "00"/"01" are protocol 0 booleans, not numbers. */
	if (!is_long && n == 2 && p[0] == '0')
		return ps_push_opaque(s);
	return parse_dec(p, n, &v) ? push_int(s, v) : ps_push_opaque(s);
}

/* Protocol 0 quoted STRING; Python rejects an unquoted argument. */
static int op_string(ps *s)
{
	const uint8_t *p;
	size_t n;
	int rc = arg_line(s, &p, &n);

	if (rc != ULP_OK)
		return rc;
	if (n < 2 || p[0] != p[n - 1] || (p[0] != '\'' && p[0] != '"'))
		return ULP_ERR_PARSE;
	/* Escapes would need decoding; such strings never name storages. */
	if (memchr(p + 1, '\\', n - 2))
		return ps_push_opaque(s);
	return push_str(s, p + 1, n - 2);
}

static int op_unicode_line(ps *s)
{
	const uint8_t *p;
	size_t n;
	int rc = arg_line(s, &p, &n);

	if (rc != ULP_OK)
		return rc;
	return memchr(p, '\\', n) ? ps_push_opaque(s) : push_str(s, p, n);
}

static int op_counted(ps *s, size_t prefix, int is_signed, int kind)
{
	const uint8_t *p;
	uint64_t n;
	int rc = arg_counted(s, prefix, is_signed, &p, &n);

	if (rc != ULP_OK)
		return rc;
	if (kind == PV_STR)
		return push_str(s, p, n);
	if (kind == PV_INT)
		return push_long(s, p, n);
	return ps_push_opaque(s);
}

static int op_fixed_int(ps *s, size_t n, int is_signed)
{
	uint64_t v;
	int rc = arg_uint(s, n, &v);

	if (rc != ULP_OK)
		return rc;
	if (is_signed && n == 4)
		return push_int(s, (int32_t)(uint32_t)v);
	return push_int(s, (int64_t)v);
}

static int op_global(ps *s, int with_mark)
{
	const uint8_t *mod, *name;
	size_t modlen, namelen, base;
	int rc = arg_line(s, &mod, &modlen);

	if (rc == ULP_OK)
		rc = arg_line(s, &name, &namelen);
	if (rc != ULP_OK)
		return rc;
	if (!with_mark)
		return push_global(s, mod, modlen, name, namelen);
	/* INST: the class arguments sit above a MARK. */
	if (ps_pop_mark(s, &base) != ULP_OK)
		return ULP_ERR_PARSE;
	s->nstack = base;
	return ps_push_opaque(s);
}

static int op_stack_global(ps *s)
{
	pv mod, name;

	if (ps_pop(s, &name) != ULP_OK || ps_pop(s, &mod) != ULP_OK)
		return ULP_ERR_PARSE;
	if (mod.kind == PV_STR && name.kind == PV_STR)
		return push_global(s, mod.a, mod.alen, name.a, name.alen);
	/* An opaque value may still be a string (e.g. one with escapes);
	 * anything modelled as something else certainly is not, and Python
	 * rejects it. */
	if ((mod.kind != PV_STR && mod.kind != PV_OPAQUE) ||
	    (name.kind != PV_STR && name.kind != PV_OPAQUE))
		return ULP_ERR_PARSE;
	return ps_push_opaque(s);
}

static int op_binpersid(ps *s)
{
	pv pid;
	int rc;

	if (ps_pop(s, &pid) != ULP_OK)
		return ULP_ERR_PARSE;
	if (pid.kind == PV_PID) {
		rc = record_pid(s, &pid);
		if (rc != ULP_OK)
			return rc;
	}
	return ps_push_opaque(s);
}

static int op_memo_line(ps *s, int is_put)
{
	const uint8_t *p;
	size_t n;
	int64_t idx;
	int rc = arg_line(s, &p, &n);

	if (rc != ULP_OK)
		return rc;
	if (!parse_dec(p, n, &idx) || idx < 0)
		return ULP_ERR_PARSE;
	return is_put ? memo_put_top(s, (uint64_t)idx)
	              : memo_get(s, (uint64_t)idx);
}

static int op_memo_bin(ps *s, size_t n, int is_put)
{
	uint64_t idx;
	int rc = arg_uint(s, n, &idx);

	if (rc != ULP_OK)
		return rc;
	return is_put ? memo_put_top(s, idx) : memo_get(s, idx);
}

static int op_skip_then_push(ps *s, size_t n)
{
	const uint8_t *p;
	int rc = arg(s, n, &p);

	return rc != ULP_OK ? rc : ps_push_opaque(s);
}

static int op_frame(ps *s)
{
	uint64_t n;
	int rc = arg_uint(s, 8, &n);

	/* Frames only group opcodes; their content is walked inline. */
	if (rc == ULP_OK && n > s->len - s->pos)
		rc = ULP_ERR_PARSE;
	return rc;
}

static int op_proto(ps *s)
{
	uint64_t v;
	int rc = arg_uint(s, 1, &v);

	if (rc != ULP_OK)
		return rc;
	return v > PS_HIGHEST_PROTOCOL ? ULP_ERR_PARSE : ULP_OK;
}

static int op_pop(ps *s)
{
	size_t base;

	/* Python: with nothing above the innermost MARK, POP drops the
	 * MARK itself. */
	if (s->nstack > ps_base(s)) {
		s->nstack--;
		return ULP_OK;
	}
	return ps_pop_mark(s, &base);
}

static int op_pop_mark(ps *s)
{
	size_t base;
	int rc = ps_pop_mark(s, &base);

	if (rc == ULP_OK)
		s->nstack = base;
	return rc;
}

/* FLOAT and PERSID: a text argument standing for a value we never need. */
static int op_line_opaque(ps *s)
{
	const uint8_t *p;
	size_t n;
	int rc = arg_line(s, &p, &n);

	return rc != ULP_OK ? rc : ps_push_opaque(s);
}

static int op_dup(ps *s)
{
	const pv *t = ps_top(s);

	return t ? ps_push(s, *t) : ULP_ERR_PARSE;
}

/* One opcode; *stop set at STOP. */
static int step(ps *s, int *stop)
{
	uint8_t op = s->p[s->pos++];

	switch (op) {
	case '(':
		return ps_mark(s);
	case '.':
		*stop = 1;
		return ps_pop(s, NULL);
	case '0':
		return op_pop(s);
	case '1':
		return op_pop_mark(s);
	case '2':
		return op_dup(s);
	case 'F':
		return op_line_opaque(s); /* FLOAT */
	case 'I':
		return op_text_int(s, 0);
	case 'L':
		return op_text_int(s, 1);
	case 'J':
		return op_fixed_int(s, 4, 1);
	case 'K':
		return op_fixed_int(s, 1, 0);
	case 'M':
		return op_fixed_int(s, 2, 0);
	case 0x8a:
		return op_counted(s, 1, 0, PV_INT); /* LONG1 */
	case 0x8b:
		return op_counted(s, 4, 1, PV_INT); /* LONG4 */
	case 'S':
		return op_string(s);
	case 'T':
		return op_counted(s, 4, 1, PV_STR); /* BINSTRING */
	case 'U':
		return op_counted(s, 1, 0, PV_STR); /* SHORT_BINSTRING */
	case 'B':
		return op_counted(s, 4, 0, PV_OPAQUE); /* BINBYTES */
	case 'C':
		return op_counted(s, 1, 0, PV_OPAQUE); /* SHORT_BINBYTES */
	case 0x8e:
		return op_counted(s, 8, 0, PV_OPAQUE); /* BINBYTES8 */
	case 0x96:
		return op_counted(s, 8, 0, PV_OPAQUE); /* BYTEARRAY8 */
	case 'V':
		return op_unicode_line(s);
	case 0x8c:
		return op_counted(s, 1, 0, PV_STR); /* SHORT_BINUNICODE */
	case 'X':
		return op_counted(s, 4, 0, PV_STR); /* BINUNICODE */
	case 0x8d:
		return op_counted(s, 8, 0, PV_STR); /* BINUNICODE8 */
	case 'G':
		return op_skip_then_push(s, 8); /* BINFLOAT */
	case 'N':
	case 0x88:
	case 0x89: /* NONE, TRUE, FALSE */
	case ']':
	case ')':
	case '}':
	case 0x8f: /* EMPTY_* */
	case 0x97: /* NEXT_BUFFER */
		return ps_push_opaque(s);
	case 0x98: /* READONLY_BUFFER */
		return ps_top(s) ? ULP_OK : ULP_ERR_PARSE;
	case 'a':
		return reduce_n(s, 1, 1); /* APPEND */
	case 'e':
		return by_mark(s, MK_INTO, 0, 0); /* APPENDS */
	case 'l':
		return by_mark(s, MK_PUSH, 0, 0); /* LIST */
	case 't':
		return by_mark(s, MK_TUPLE, 0, 0); /* TUPLE */
	case 0x85:
		return reduce_n(s, 1, 0); /* TUPLE1 */
	case 0x86:
		return reduce_n(s, 2, 0); /* TUPLE2 */
	case 0x87:
		return reduce_n(s, 3, 0); /* TUPLE3 */
	case 'd':
		return by_mark(s, MK_PUSH, 1, 0); /* DICT */
	case 's':
		return reduce_n(s, 2, 1); /* SETITEM */
	case 'u':
		return by_mark(s, MK_INTO, 1, 0); /* SETITEMS */
	case 0x90:
		return by_mark(s, MK_INTO, 0, 0); /* ADDITEMS */
	case 0x91:
		return by_mark(s, MK_PUSH, 0, 0); /* FROZENSET */
	case 'c':
		return op_global(s, 0);
	case 'i':
		return op_global(s, 1); /* INST */
	case 0x93:
		return op_stack_global(s);
	case 'o':
		return by_mark(s, MK_PUSH, 0, 1); /* OBJ */
	case 'R':
		return reduce_n(s, 1, 1); /* REDUCE */
	case 'b':
		return reduce_n(s, 1, 1); /* BUILD */
	case 0x81:
		return reduce_n(s, 2, 0); /* NEWOBJ */
	case 0x92:
		return reduce_n(s, 3, 0); /* NEWOBJ_EX */
	case 0x80:
		return op_proto(s);
	case 0x95:
		return op_frame(s);
	case 'P':
		return op_line_opaque(s); /* PERSID */
	case 'Q':
		return op_binpersid(s);
	case 'g':
		return op_memo_line(s, 0); /* GET */
	case 'h':
		return op_memo_bin(s, 1, 0); /* BINGET */
	case 'j':
		return op_memo_bin(s, 4, 0); /* LONG_BINGET */
	case 'p':
		return op_memo_line(s, 1); /* PUT */
	case 'q':
		return op_memo_bin(s, 1, 1); /* BINPUT */
	case 'r':
		return op_memo_bin(s, 4, 1); /* LONG_BINPUT */
	case 0x94:
		return memo_put_top(s, s->nmemo); /* MEMOIZE */
	case 0x82:
		return op_skip_then_push(s, 1); /* EXT1 */
	case 0x83:
		return op_skip_then_push(s, 2); /* EXT2 */
	case 0x84:
		return op_skip_then_push(s, 4); /* EXT4 */
	default:
		return ULP_ERR_PARSE;
	}
}

void ulp_pickle_scan_free(ulp_pickle_scan *scan)
{
	if (!scan)
		return;
	free(scan->v);
	scan->v = NULL;
	scan->n = 0;
}

int ulp_pickle_scan_storages(const uint8_t *pkl, size_t len,
                             ulp_pickle_scan *out)
{
	ps s = { .p = pkl, .len = len, .out = out };
	int stop = 0, rc = ULP_OK;

	out->n = 0;
	out->v = NULL;
	while (rc == ULP_OK && !stop) {
		if (s.pos >= s.len) {
			rc = ULP_ERR_PARSE; /* no STOP */
			break;
		}
		rc = step(&s, &stop);
	}
	free(s.stack);
	free(s.marks);
	free(s.memo);
	if (rc != ULP_OK)
		ulp_pickle_scan_free(out);
	return rc;
}
