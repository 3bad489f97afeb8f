/*
 * test_store_util.h - helpers of the store's unit tests (tests/test_store.c,
 * tests/test_chains.c): a temporary store per test, safetensors files and
 * "training steps", file I/O through the store API, and an integrity check
 * of every version against its object.  Include after store.h and
 * criterion.h; each test file has its own temporary directory.
 */
#ifndef ULP_TEST_STORE_UTIL_H
#define ULP_TEST_STORE_UTIL_H

/* ------------------------------------------------------------ helpers */

static char tdir[256];

static inline int rm_one(const char *p, const struct stat *sb, int type,
                         struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(p);
}

static inline void setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tdir, sizeof tdir, "%s/ulpstore-XXXXXX", base ? base : "/tmp");
	cr_assert(mkdtemp(tdir), "mkdtemp: %s", strerror(errno));
}

static inline void teardown(void)
{
	nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline char *store_dir(void)
{
	static char d[300];

	snprintf(d, sizeof d, "%s/store", tdir);
	return d;
}

static inline ulp_store *open_opts(ulp_store_opts *o)
{
	ulp_store *st = NULL;
	int rc = ulp_store_open(store_dir(), o, &st);

	cr_assert_eq(rc, 0, "ulp_store_open: %s", strerror(-rc));
	return st;
}

static inline ulp_store *open_k(unsigned keyframe_every)
{
	ulp_store_opts o = { 0 };

	o.settle_ms = 1;
	o.encoder_threads = 2;
	o.cache_bytes = 8u << 20;
	o.keyframe_every = keyframe_every;
	return open_opts(&o);
}

static inline ulp_store *open_default(void)
{
	return open_k(0);
}

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			seed = rng_next(&seed) ^ i;
		p[i] = (uint8_t)(seed >> (8 * (i % 8)));
	}
}

/* A safetensors file: a bf16 matrix, an f32 vector, an i64 scalar. */
typedef struct sfile {
	uint8_t *p;
	size_t len;
	size_t data; /* offset of the first tensor byte */
	size_t n16, n32;
} sfile;

static inline sfile st_make(size_t n16, size_t n32, uint64_t seed)
{
	char json[512];
	sfile f = { 0 };
	size_t b16 = 2 * n16, b32 = 4 * n32;
	int hl = snprintf(json, sizeof json,
	                  "{\"__metadata__\":{\"format\":\"pt\"},"
	                  "\"layer.weight\":{\"dtype\":\"BF16\",\"shape\":[%zu,"
	                  "%zu],\"data_offsets\":[0,%zu]},"
	                  "\"layer.bias\":{\"dtype\":\"F32\",\"shape\":[%zu],"
	                  "\"data_offsets\":[%zu,%zu]},"
	                  "\"step\":{\"dtype\":\"I64\",\"shape\":[],"
	                  "\"data_offsets\":[%zu,%zu]}}",
	                  n16 / 64, (size_t)64, b16, n32, b16, b16 + b32,
	                  b16 + b32, b16 + b32 + 8);
	size_t pad = (8 - (size_t)hl % 8) % 8;
	size_t hlen = (size_t)hl + pad;

	cr_assert(n16 % 64 == 0);
	f.n16 = n16;
	f.n32 = n32;
	f.data = 8 + hlen;
	f.len = f.data + b16 + b32 + 8;
	f.p = malloc(f.len);
	cr_assert(f.p);
	for (int i = 0; i < 8; i++)
		f.p[i] = (uint8_t)(hlen >> (8 * i));
	memcpy(f.p + 8, json, (size_t)hl);
	memset(f.p + 8 + hl, ' ', pad);
	uint8_t *d = f.p + f.data;
	for (size_t i = 0; i < n16; i++) {
		/* Weights around +-0.02: exponent about 2^-6. */
		uint64_t r = rng_next(&seed);
		uint16_t v = (uint16_t)(0x3c00 + (r & 0x1ff)) |
		             (uint16_t)((r >> 20 & 1) << 15);
		memcpy(d + 2 * i, &v, 2);
	}
	for (size_t i = 0; i < n32; i++) {
		uint64_t r = rng_next(&seed);
		uint32_t v = 0x3a000000u + (uint32_t)(r & 0xffffff);
		memcpy(d + b16 + 4 * i, &v, 4);
	}
	uint64_t step = 0;
	memcpy(d + b16 + b32, &step, 8);
	return f;
}

/* One "training step": about a third of the elements move 1-2 ULPs. */
static inline void st_step(sfile *f, uint64_t seed)
{
	uint8_t *d = f->p + f->data;

	for (size_t i = 0; i < f->n16; i++) {
		uint64_t r = rng_next(&seed);
		if (r % 3)
			continue;
		uint16_t v;
		memcpy(&v, d + 2 * i, 2);
		v = (uint16_t)(v + ((r >> 8) & 1 ? 1 : -1));
		memcpy(d + 2 * i, &v, 2);
	}
	for (size_t i = 0; i < f->n32; i++) {
		uint64_t r = rng_next(&seed);
		if (r % 3)
			continue;
		uint32_t v;
		memcpy(&v, d + 2 * f->n16 + 4 * i, 4);
		v += (uint32_t)(r >> 8 & 15) - 7;
		memcpy(d + 2 * f->n16 + 4 * i, &v, 4);
	}
	uint64_t step;
	memcpy(&step, d + 2 * f->n16 + 4 * f->n32, 8);
	step++;
	memcpy(d + 2 * f->n16 + 4 * f->n32, &step, 8);
}

static inline sfile st_copy(const sfile *f)
{
	sfile c = *f;

	c.p = malloc(f->len);
	cr_assert(c.p);
	memcpy(c.p, f->p, f->len);
	return c;
}

static inline uint64_t lookup(ulp_store *st, uint64_t parent, const char *name)
{
	ulp_attr a;
	int rc = ulp_ns_lookup(st, parent, name, &a);

	cr_assert_eq(rc, 0, "lookup %s: %s", name, strerror(-rc));
	return a.ino;
}

static inline uint64_t mkdir_in(ulp_store *st, uint64_t parent,
                                const char *name)
{
	ulp_attr a;
	int rc = ulp_ns_mkdir(st, parent, name, 0755, 0, 0, &a);

	cr_assert_eq(rc, 0, "mkdir %s: %s", name, strerror(-rc));
	return a.ino;
}

static inline void write_all(ulp_file *f, const void *p, size_t len, off_t off)
{
	const uint8_t *b = p;
	/* FUSE-sized pieces. */
	for (size_t done = 0; done < len;) {
		size_t n = len - done < 131072 ? len - done : 131072;
		ssize_t w = ulp_file_write(f, b + done, n, off + (off_t)done);
		cr_assert_eq(w, (ssize_t)n, "write: %zd", w);
		done += n;
	}
}

/* Open (creating) parent/name for writing with flags, write, release. */
static inline uint64_t put_file(ulp_store *st, uint64_t parent,
                                const char *name, const void *p, size_t len)
{
	ulp_attr a;
	ulp_file *f;
	int rc = ulp_ns_lookup(st, parent, name, &a);

	if (rc == -ENOENT) {
		rc = ulp_ns_create(st, parent, name, 0644, 0, 0, &a);
		cr_assert_eq(rc, 0, "create %s: %s", name, strerror(-rc));
	}
	cr_assert_eq(rc, 0);
	rc = ulp_file_open(st, a.ino, O_WRONLY | O_TRUNC, &f, NULL);
	cr_assert_eq(rc, 0, "open %s: %s", name, strerror(-rc));
	write_all(f, p, len, 0);
	cr_assert_eq(ulp_file_flush(f), 0);
	ulp_file_release(f);
	return a.ino;
}

static inline uint8_t *get_file(ulp_store *st, uint64_t ino, size_t *len)
{
	ulp_attr a;
	ulp_file *f;
	int rc = ulp_ns_getattr(st, ino, &a);

	cr_assert_eq(rc, 0);
	rc = ulp_file_open(st, ino, O_RDONLY, &f, NULL);
	cr_assert_eq(rc, 0, "open for reading: %s", strerror(-rc));
	uint8_t *p = malloc(a.size + 1);
	cr_assert(p);
	size_t done = 0;
	/* Odd-sized reads cross chunk boundaries. */
	for (;;) {
		size_t want = 77777;
		if (done + want > a.size + 1)
			want = a.size + 1 - done;
		ssize_t n = ulp_file_read(f, p + done, want, (off_t)done);
		cr_assert_geq(n, 0, "read: %s", strerror((int)-n));
		if (n == 0)
			break;
		done += (size_t)n;
		cr_assert_leq(done, a.size);
	}
	ulp_file_release(f);
	cr_assert_eq(done, a.size);
	*len = done;
	return p;
}

static inline void expect_content(ulp_store *st, uint64_t ino, const void *p,
                                  size_t len)
{
	size_t n;
	uint8_t *got = get_file(st, ino, &n);

	cr_assert_eq(n, len, "size %zu, expected %zu", n, len);
	cr_assert(memcmp(got, p, len) == 0, "content differs");
	free(got);
}

/* The store's "chunks decoded" counter. */
static inline uint64_t cache_decodes(ulp_store *st)
{
	ulp_store_stats s;

	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	return s.cache_decodes;
}

static inline void sync_ok(ulp_store *st)
{
	int rc = ulp_store_sync(st);

	cr_assert_eq(rc, 0, "sync: %s", strerror(-rc));
}

static inline ulp_version_info current(ulp_store *st, uint64_t ino)
{
	ulp_version_info v;
	uint64_t vid = 0;

	cr_assert_eq(ulp_ns_version(st, ino, &vid), 0);
	cr_assert_neq(vid, 0, "file %llu has no committed version",
	              (unsigned long long)ino);
	cr_assert_eq(ulp_version_get(st, vid, &v), 0);
	return v;
}

static inline void expect_version(ulp_store *st, uint64_t vid, const void *p,
                                  size_t len)
{
	uint8_t *got = malloc(len + 16);
	ssize_t n;

	cr_assert(got);
	n = ulp_version_read(st, vid, got, len + 16, 0);
	cr_assert_eq(n, (ssize_t)len, "version %llu: read %zd of %zu",
	             (unsigned long long)vid, n, len);
	cr_assert(memcmp(got, p, len) == 0, "version %llu differs",
	          (unsigned long long)vid);
	free(got);
}

/* Sum of the sizes of the files in STORE/objects and their count. */
static inline uint64_t object_bytes(size_t *count)
{
	char d[320];
	DIR *dir;
	struct dirent *e;
	uint64_t sum = 0;

	snprintf(d, sizeof d, "%s/objects", store_dir());
	dir = opendir(d);
	cr_assert(dir);
	*count = 0;
	while ((e = readdir(dir))) {
		struct stat sb;
		if (e->d_name[0] == '.')
			continue;
		cr_assert_eq(fstatat(dirfd(dir), e->d_name, &sb, 0), 0);
		sum += (uint64_t)sb.st_size;
		(*count)++;
	}
	closedir(dir);
	return sum;
}

static inline int exists_in(const char *sub, const char *name)
{
	char p[400];

	snprintf(p, sizeof p, "%s/%s/%s", store_dir(), sub, name);
	return access(p, F_OK) == 0;
}

/* Every live or ghost version has its object, of its recorded size, and
 * STORE/objects holds nothing else; no staged file is left. */
typedef struct integ {
	ulp_store *st;
	size_t objects;
	uint64_t bytes;
} integ;

static inline int integ_one(void *opaque, const ulp_version_info *v,
                            const char *path)
{
	integ *g = opaque;
	char p[400];
	struct stat sb;

	if (v->state == ULP_VERSION_DELETED)
		return 0;
	snprintf(p, sizeof p, "%s/objects/%s", store_dir(), v->object);
	cr_assert_eq(stat(p, &sb), 0, "object of %s (v%llu) missing", path,
	             (unsigned long long)v->id);
	cr_assert_eq((uint64_t)sb.st_size, v->stored);
	cr_assert_lt(v->depth, 64);
	/* And it decodes to the bytes it was committed with. */
	uint8_t *buf = malloc(v->size + 1), h[16];
	cr_assert(buf);
	cr_assert_eq(ulp_version_read(g->st, v->id, buf, v->size + 1, 0),
	             (ssize_t)v->size, "v%llu unreadable",
	             (unsigned long long)v->id);
	/* (flat: a version committed before object format 3) */
	uint8_t hf[16];
	ulp_content_hash(ULP_HASH_TREE, buf, v->size, h);
	ulp_hash128(buf, v->size, hf);
	cr_assert(memcmp(h, v->hash, 16) == 0 || memcmp(hf, v->hash, 16) == 0);
	free(buf);
	g->objects++;
	g->bytes += v->stored;
	return 0;
}

/* Wait until every closed file is committed and every background
 * re-encode (flips, rebases) is done. */
static inline void settle_all(ulp_store *st)
{
	sync_ok(st);
	int rc = ulp_store_gc(st);
	cr_assert_eq(rc, 0, "gc: %s", strerror(-rc));
}

static inline void check_integrity(ulp_store *st)
{
	integ g = { st, 0, 0 };
	size_t n;
	ulp_store_stats s;

	settle_all(st);
	cr_assert_eq(ulp_version_list(st, NULL, integ_one, &g), 0);
	uint64_t bytes = object_bytes(&n);
	cr_assert_eq(n, g.objects, "%zu object files, %zu versions", n,
	             g.objects);
	cr_assert_eq(bytes, g.bytes);
	cr_assert_eq(ulp_store_stats_get(st, &s), 0);
	cr_assert_eq(s.stored_bytes, g.bytes);
	cr_assert_eq(s.staged_bytes, 0, "staged bytes left: %llu",
	             (unsigned long long)s.staged_bytes);
	cr_assert_eq(s.queued, 0);
}

#ifdef SQLITE_OK
/* The first column of sql's first row (0: none) on the SQLite database at
 * path (for the files that include sqlite3.h first). */
static inline int64_t sql_at(const char *path, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *s;
	int64_t v = 0;
	int rc;

	cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK,
	             "%s: %s", sql, sqlite3_errmsg(h));
	rc = sqlite3_step(s);
	cr_assert(rc == SQLITE_ROW || rc == SQLITE_DONE, "%s: %s", sql,
	          sqlite3_errmsg(h));
	if (rc == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(h);
	return v;
}

/* The same on the store's catalog. */
static inline int64_t cat_sql(const char *sql)
{
	char db[400];

	snprintf(db, sizeof db, "%s/catalog.db", store_dir());
	return sql_at(db, sql);
}
#endif

#endif /* ULP_TEST_STORE_UTIL_H */
