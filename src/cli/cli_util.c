/*
 * cli_util.c - file mapping, descriptors, parallel decoding, progress and
 * argument parsing shared by the subcommands.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_err(const char *fmt, ...)
{
	va_list ap;
	fputs("ulpfs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *cli_store_error(const char *store, int err, char *buf, size_t n)
{
	struct stat sb;
	if (err != -EACCES && err != -EPERM)
		return strerror(-err);
	if (stat(store, &sb) < 0) {
		snprintf(buf, n,
		         "permission denied: a store is private to the "
		         "user its daemon runs as");
		return buf;
	}
	struct passwd *pw = getpwuid(sb.st_uid);
	snprintf(buf, n,
	         "permission denied: a store is private to the user its "
	         "daemon runs as (%s%suid %u); run ulpfs as that user",
	         pw ? pw->pw_name : "", pw ? ", " : "", (unsigned)sb.st_uid);
	return buf;
}

double cli_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int cli_map_open(cli_map *m, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	m->path = path;
	m->data = NULL;
	m->size = 0;
	if (fd < 0) {
		cli_err("%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		cli_err("%s: %s", path,
		        S_ISREG(st.st_mode) ? strerror(errno)
		                            : "not a regular file");
		close(fd);
		return -1;
	}
	if (st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE,
		               fd, 0);
		if (p == MAP_FAILED) {
			cli_err("%s: mmap: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		/* Encoding reads each byte once, front to back. */
		madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
		m->data = p;
		m->size = (uint64_t)st.st_size;
	}
	close(fd);
	return 0;
}

void cli_map_close(cli_map *m)
{
	if (m->data)
		munmap((void *)m->data, m->size);
	m->data = NULL;
	m->size = 0;
}

int cli_map_read(void *opaque, uint64_t off, void *buf, size_t len)
{
	const cli_map *m = opaque;
	if (off > m->size || len > m->size - off)
		return ULP_ERR_REF;
	memcpy(buf, m->data + off, len);
	return ULP_OK;
}

const void *cli_map_map(void *opaque, uint64_t off, size_t len)
{
	const cli_map *m = opaque;
	if (off > m->size || len > m->size - off)
		return NULL;
	return m->data + off;
}

int cli_fd_read_at(void *opaque, uint64_t off, void *buf, size_t len)
{
	int fd = *(const int *)opaque;
	uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? ULP_ERR_CORRUPT : ULP_ERR_IO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return ULP_OK;
}

int cli_fd_write(void *opaque, const void *buf, size_t len)
{
	int fd = *(const int *)opaque;
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ULP_ERR_IO;
		p += n;
		len -= (size_t)n;
	}
	return ULP_OK;
}

int cli_check_ref(const ulp_object *obj, const cli_map *ref,
                  const char *obj_path)
{
	uint8_t h[16] = { 0 };
	if (!ulp_object_has_ref(obj))
		return 0;
	if (!ref) {
		cli_err("%s: was packed against a reference; give it with "
		        "--ref",
		        obj_path);
		return -1;
	}
	/* The reference hash is of either kind (the packer's, or the
	 * store's for an object taken from a store). */
	int same = ref->size == ulp_object_ref_size(obj);
	if (same) {
		ulp_content_hash(ULP_HASH_TREE, ref->data, ref->size, h);
		same = memcmp(h, ulp_object_ref_hash(obj), 16) == 0;
	}
	if (!same && ref->size == ulp_object_ref_size(obj)) {
		ulp_hash128(ref->data, ref->size, h);
		same = memcmp(h, ulp_object_ref_hash(obj), 16) == 0;
	}
	if (!same) {
		cli_err("%s: %s is not the reference it was packed against",
		        obj_path, ref->path);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------ parallel decode */

ulp_pool *cli_pool(unsigned min_threads)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static ulp_pool *pool;

	pthread_mutex_lock(&mu);
	if (!pool) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		unsigned n = c < 1 ? 1 : (unsigned)c;
		pool = ulp_pool_new(n > min_threads ? n : min_threads);
	}
	pthread_mutex_unlock(&mu);
	return pool;
}

/* Worker jobs on the CLI's pool claim chunks in order, each with a lane
 * (a decoding context); streaming, at most window chunks are decoded but
 * not yet written.  As in the codec's encoder (pipeline.c), a worker
 * returns rather than block a pool thread when the window is full, and
 * the writer starts workers again and runs queued ones itself. */
typedef struct dec_pool {
	ulp_dctx *const *dctx;
	ulp_dctx **own;    /* lanes' own contexts, made on first use */
	unsigned *free_ln; /* lanes no worker holds */
	unsigned nlanes, nfree, active;
	ulp_pool_group *g;
	const ulp_object *obj;
	const cli_map *ref;
	ulp_refs refs;
	uint8_t side_hash[16];
	uint8_t *dst;
	int out_fd;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t n, next, written, window;
	uint8_t **bufs; /* streaming: window decoded chunks */
	int *ready;
	int rc;
} dec_pool;

/* Whether chunk next may be claimed (mu held). */
static int dec_room(const dec_pool *p)
{
	return !p->rc && p->next < p->n &&
	       (p->dst || p->next - p->written < p->window);
}

ulp_dctx *cli_dctx_new(void)
{
	ulp_dctx *d = ulp_dctx_new();
	ulp_dctx_set_payload_check(d, 0);
	return d;
}

static void dec_worker(void *arg)
{
	dec_pool *p = arg;
	pthread_mutex_lock(&p->mu);
	unsigned lane = p->free_ln[--p->nfree];
	ulp_dctx *d = p->dctx ? p->dctx[lane] : p->own[lane];
	if (!d && !p->dctx)
		d = p->own[lane] = cli_dctx_new();
	if (!d && !p->rc)
		p->rc = ULP_ERR_NOMEM;
	while (dec_room(p)) {
		size_t i = p->next++;
		pthread_mutex_unlock(&p->mu);

		uint64_t off;
		uint32_t len;
		ulp_object_chunk_range(p->obj, i, &off, &len);
		uint8_t *to = p->dst ? p->dst + off : p->bufs[i % p->window];
		int rc = ulp_chunk_decode_refs(d, p->obj, i, &p->refs, to);
		pthread_mutex_lock(&p->mu);
		if (rc && !p->rc)
			p->rc = rc;
		if (!p->dst)
			p->ready[i % p->window] = 1;
		pthread_cond_broadcast(&p->cv);
	}
	p->free_ln[p->nfree++] = lane;
	p->active--;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Until done(p) (mu held): keep workers going, one per lane at most, and
 * run the queued ones here. */
static void dec_wait(dec_pool *p, int (*done)(const dec_pool *, size_t),
                     size_t i)
{
	while (!p->rc && !done(p, i)) {
		while (p->active < p->nlanes && dec_room(p) &&
		       ulp_pool_submit(p->g, dec_worker, p) == ULP_OK)
			p->active++;
		if (p->active == 0 && dec_room(p)) { /* none could be queued */
			p->active++;
			pthread_mutex_unlock(&p->mu);
			dec_worker(p);
			pthread_mutex_lock(&p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		int ran = ulp_pool_group_help(p->g);
		pthread_mutex_lock(&p->mu);
		if (!ran && !p->rc && !done(p, i))
			pthread_cond_wait(&p->cv, &p->mu);
	}
}

static int chunk_ready(const dec_pool *p, size_t i)
{
	return p->ready[i % p->window];
}

static int all_decoded(const dec_pool *p, size_t i)
{
	(void)i;
	return p->next >= p->n && p->active == 0;
}

/* Streaming mode: write chunks in order as they are ready. */
static int dec_drain(dec_pool *p)
{
	for (size_t i = 0; i < p->n; i++) {
		uint64_t off;
		uint32_t len;
		pthread_mutex_lock(&p->mu);
		dec_wait(p, chunk_ready, i);
		int rc = p->rc;
		pthread_mutex_unlock(&p->mu);
		if (rc)
			return rc;
		ulp_object_chunk_range(p->obj, i, &off, &len);
		rc = cli_fd_write(&p->out_fd, p->bufs[i % p->window], len);
		pthread_mutex_lock(&p->mu);
		p->ready[i % p->window] = 0;
		p->written++;
		if (rc && !p->rc)
			p->rc = rc;
		pthread_mutex_unlock(&p->mu);
		if (rc)
			return rc;
	}
	return ULP_OK;
}

int cli_decode_all(const ulp_object *obj, const cli_map *ref, unsigned nthreads,
                   ulp_dctx *const *dctx, uint8_t *dst, int out_fd)
{
	return cli_decode_all_side(obj, ref, NULL, nthreads, dctx, dst, out_fd);
}

/* The content hash of side of the kind obj names it by (the tree hash
 * when neither matches: decoding then refuses it). */
static void side_hash_of(const ulp_object *obj, const cli_map *side,
                         uint8_t h[16])
{
	ulp_content_hash(ULP_HASH_TREE, side->data, side->size, h);
	if (memcmp(h, ulp_object_side_hash(obj), 16) != 0) {
		uint8_t flat[16];
		ulp_hash128(side->data, side->size, flat);
		if (memcmp(flat, ulp_object_side_hash(obj), 16) == 0)
			memcpy(h, flat, 16);
	}
}

int cli_decode_all_side(const ulp_object *obj, const cli_map *ref,
                        const cli_map *side, unsigned nthreads,
                        ulp_dctx *const *dctx, uint8_t *dst, int out_fd)
{
	dec_pool p = { .dctx = dctx,
		       .obj = obj,
		       .ref = ref,
		       .dst = dst,
		       .out_fd = out_fd };
	int rc = ULP_OK;

	p.refs.ref_read = ref ? cli_map_read : NULL;
	p.refs.ref_map = ref ? cli_map_map : NULL;
	p.refs.ref_opaque = (void *)ref;
	if (side && ulp_object_has_side(obj)) {
		side_hash_of(obj, side, p.side_hash);
		p.refs.side_read = cli_map_read;
		p.refs.side_opaque = (void *)side;
		p.refs.side_hash = p.side_hash;
		p.refs.side_size = side->size;
	}

	if (nthreads == 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		nthreads = c < 1 ? 1 : (unsigned)c;
	}
	if (nthreads > 64) {
		if (dctx)
			return ULP_ERR_ARG;
		nthreads = 64;
	}
	p.n = ulp_object_chunk_count(obj);
	p.window = 2 * (size_t)nthreads;
	p.nlanes = p.nfree = nthreads;
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	ulp_pool *pool = cli_pool(nthreads);
	p.g = pool ? ulp_pool_group_new(pool) : NULL;
	p.own = calloc(nthreads, sizeof(*p.own));
	p.free_ln = calloc(nthreads, sizeof(*p.free_ln));
	if (!p.g || !p.own || !p.free_ln)
		rc = ULP_ERR_NOMEM;
	for (unsigned k = 0; !rc && k < nthreads; k++)
		p.free_ln[k] = k;
	if (!rc && !dst) {
		uint32_t maxlen = 0;
		for (size_t i = 0; i < p.n; i++) {
			uint64_t off;
			uint32_t len;
			ulp_object_chunk_range(obj, i, &off, &len);
			if (len > maxlen)
				maxlen = len;
		}
		p.bufs = calloc(p.window, sizeof(*p.bufs));
		p.ready = calloc(p.window, sizeof(*p.ready));
		if (!p.bufs || !p.ready)
			rc = ULP_ERR_NOMEM;
		for (size_t k = 0; !rc && k < p.window; k++)
			if (!(p.bufs[k] = malloc(maxlen ? maxlen : 1)))
				rc = ULP_ERR_NOMEM;
	}
	if (!rc && !dst)
		rc = dec_drain(&p);
	else if (!rc) {
		pthread_mutex_lock(&p.mu);
		dec_wait(&p, all_decoded, 0);
		pthread_mutex_unlock(&p.mu);
	}
	if (rc) {
		pthread_mutex_lock(&p.mu);
		if (!p.rc)
			p.rc = rc;
		pthread_mutex_unlock(&p.mu);
	}
	ulp_pool_group_free(p.g); /* the workers see rc and return */
	if (!rc)
		rc = p.rc;
	for (unsigned k = 0; p.own && k < nthreads; k++)
		ulp_dctx_free(p.own[k]);
	free(p.own);
	free(p.free_ln);
	for (size_t k = 0; p.bufs && k < p.window; k++)
		free(p.bufs[k]);
	free(p.bufs);
	free(p.ready);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	return rc;
}

/* ------------------------------------------------------------ progress */

void cli_progress_init(cli_progress *p, const char *what)
{
	p->what = what;
	p->tty = isatty(STDERR_FILENO);
	p->last = 0;
}

void cli_progress_cb(void *opaque, uint64_t done, uint64_t total)
{
	cli_progress *p = opaque;
	double t = cli_now();
	if (!p->tty || (t - p->last < 0.2 && done < total))
		return;
	p->last = t;
	fprintf(stderr, "\r%s: %5.1f%% of %.1f MB", p->what,
	        total ? 100.0 * (double)done / (double)total : 100.0,
	        (double)total / 1e6);
}

void cli_progress_end(cli_progress *p)
{
	if (p->tty && p->last > 0)
		fputs("\r\033[K", stderr);
}

/* ------------------------------------------------------------- parsing */

int cli_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 0:
		break;
	default:
		return -1;
	}
	if (*end && end[1])
		return -1;
	if (v > (~0ull >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int cli_parse_chunk_size(const char *cmd, const char *s, uint32_t *out)
{
	uint64_t v;
	if (cli_parse_size(s, &v) < 0 || v < ULP_CHUNK_SIZE_MIN ||
	    v > ULP_CHUNK_SIZE_MAX) {
		cli_err("%s: --chunk-size must be between 4K and 64M", cmd);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int cli_parse_uint(const char *s, unsigned max, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}
