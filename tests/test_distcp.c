/*
 * test_distcp.c - the DCP data file parser: torch.save archives (the real
 * ones of tests/data) back to back, as FileSystemWriter writes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ulpfs/ulp.h"

typedef struct blob {
	uint8_t *p;
	size_t len;
} blob;

static blob load(const char *name)
{
	char path[1024];
	blob b = { 0 };
	FILE *f;
	long n;

	snprintf(path, sizeof path, "%s/%s", ULP_TEST_DATA, name);
	f = fopen(path, "rb");
	cr_assert(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b.p = malloc((size_t)n);
	cr_assert(b.p);
	cr_assert_eq(fread(b.p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	b.len = (size_t)n;
	return b;
}

/* The concatenation of the fixtures named, in an exact-size buffer (so
 * the sanitizer catches any read past the end). */
static blob cat(const char *const *names, size_t n)
{
	blob out = { 0 };

	for (size_t i = 0; i < n; i++) {
		blob b = load(names[i]);
		out.p = realloc(out.p, out.len + b.len);
		cr_assert(out.p);
		memcpy(out.p + out.len, b.p, b.len);
		out.len += b.len;
		free(b.p);
	}
	return out;
}

static const ulp_tensor *find(const ulp_tensor_map *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->v[i].name, name) == 0)
			return &m->v[i];
	return NULL;
}

/* Every storage of each archive appears once, at its offset in the file,
 * with its dtype and shape. */
static void check_against_parts(const ulp_tensor_map *m, const blob *whole,
                                const char *const *names, size_t n)
{
	size_t base = 0, total = 0;

	for (size_t i = 0; i < n; i++) {
		blob b = load(names[i]);
		ulp_tensor_map part;

		cr_assert_eq(ulp_torchzip_parse(b.p, b.len, &part), ULP_OK);
		for (size_t j = 0; j < part.n; j++) {
			const ulp_tensor *t = &part.v[j];
			int seen = 0;

			for (size_t k = 0; k < m->n; k++) {
				const ulp_tensor *u = &m->v[k];
				if (u->offset != base + t->offset)
					continue;
				seen++;
				cr_expect_eq(u->nbytes, t->nbytes);
				cr_expect_eq(u->dtype, t->dtype);
				cr_expect_str_eq(u->dtype_name, t->dtype_name);
				cr_expect_eq(u->ndim, t->ndim);
				cr_expect(memcmp(whole->p + u->offset,
				                 b.p + t->offset,
				                 t->nbytes) == 0);
			}
			cr_expect_eq(seen, 1, "%s %s", names[i], t->name);
		}
		total += part.n;
		base += b.len;
		ulp_tensor_map_free(&part);
		free(b.p);
	}
	cr_expect_eq(m->n, total);
}

static const char *const three[] = { "tiny_state.pt", "tiny_optim.pt",
	                             "tiny_state.pt" };

Test(distcp, archives_back_to_back)
{
	blob b = cat(three, 3);
	ulp_tensor_map m, d;

	cr_assert_eq(ulp_distcp_parse(b.p, b.len, &m), ULP_OK);
	cr_expect_eq(m.format, ULP_FMT_DISTCP);
	check_against_parts(&m, &b, three, 3);
	/* The two copies of tiny_state's first storage: first and second of
	 * their type and size. */
	const ulp_tensor *a = find(&m, "Float/96/0"), *c = find(&m, "Float/96/"
	                                                            "1");
	cr_assert(a && c);
	cr_expect_lt(a->offset, c->offset);
	cr_expect(memcmp(b.p + a->offset, b.p + c->offset, 96) == 0);
	/* Detection finds the same map. */
	cr_assert_eq(ulp_format_parse(b.p, b.len, &d), ULP_OK);
	cr_expect_eq(d.format, ULP_FMT_DISTCP);
	cr_expect_eq(d.n, m.n);
	cr_expect_eq(ulp_tensor_map_layout_hash(&d),
	             ulp_tensor_map_layout_hash(&m));
	ulp_tensor_map_free(&m);
	ulp_tensor_map_free(&d);
	free(b.p);
}

/* One archive alone is a torch zip, not a DCP file. */
Test(distcp, single_archive_stays_torchzip)
{
	blob b = load("tiny_state.pt");
	ulp_tensor_map m;

	cr_assert_eq(ulp_format_parse(b.p, b.len, &m), ULP_OK);
	cr_expect_eq(m.format, ULP_FMT_TORCHZIP);
	ulp_tensor_map_free(&m);
	free(b.p);
}

/* An item of another size written before the others moves every offset
 * but no name: the same tensors match across the two files. */
Test(distcp, names_survive_moved_offsets)
{
	static const char *const before[] = { "tiny_state.pt", "tiny_state."
		                                               "pt" };
	static const char *const after[] = { "tiny_p5.pt", "tiny_state.pt",
		                             "tiny_state.pt" };
	blob x = cat(before, 2), y = cat(after, 3);
	ulp_tensor_map mx, my;

	cr_assert_eq(ulp_distcp_parse(x.p, x.len, &mx), ULP_OK);
	cr_assert_eq(ulp_distcp_parse(y.p, y.len, &my), ULP_OK);
	for (size_t i = 0; i < mx.n; i++) {
		const ulp_tensor *t = &mx.v[i], *u = find(&my, t->name);

		cr_assert(u, "%s lost", t->name);
		cr_expect_eq(u->nbytes, t->nbytes);
		cr_expect(memcmp(x.p + t->offset, y.p + u->offset, t->nbytes) ==
		          0);
	}
	ulp_tensor_map_free(&mx);
	ulp_tensor_map_free(&my);
	free(x.p);
	free(y.p);
}

static void expect_generic(const uint8_t *p, size_t n, const char *what)
{
	uint8_t *d = malloc(n ? n : 1);
	ulp_tensor_map m;

	cr_assert(d);
	memcpy(d, p, n);
	cr_expect_eq(ulp_distcp_parse(d, n, &m), ULP_ERR_PARSE, "%s", what);
	cr_expect_eq(m.n, 0);
	cr_expect_eq(ulp_format_parse(d, n, &m), ULP_OK);
	cr_expect_eq(m.format, ULP_FMT_UNKNOWN, "%s", what);
	ulp_tensor_map_free(&m);
	free(d);
}

/* Bytes after the last archive, or between two, leave the file to the
 * generic path; so does every truncation inside an archive. */
Test(distcp, damaged_files_are_generic)
{
	blob b = cat(three, 3), one = load("tiny_state.pt");
	uint8_t *g = malloc(b.len + 7);

	cr_assert(g);
	memcpy(g, b.p, b.len);
	memcpy(g + b.len, "garbage", 7);
	expect_generic(g, b.len + 7, "trailing bytes");
	memcpy(g, b.p, one.len);
	memcpy(g + one.len, "garbage", 7);
	memcpy(g + one.len + 7, b.p + one.len, b.len - one.len);
	expect_generic(g, b.len + 7, "bytes between archives");
	for (size_t n = one.len + 1; n < b.len; n += 7) {
		ulp_tensor_map m;
		uint8_t *d = malloc(n);

		memcpy(d, b.p, n);
		int rc = ulp_format_parse(d, n, &m);
		cr_assert_eq(rc, ULP_OK);
		/* A cut that falls between two archives leaves a valid
		 * shorter file. */
		cr_expect(m.format == ULP_FMT_UNKNOWN ||
		                  m.format == ULP_FMT_DISTCP,
		          "cut at %zu", n);
		ulp_tensor_map_free(&m);
		free(d);
	}
	free(g);
	free(one.p);
	free(b.p);
}

/* Flipped bytes anywhere: never a crash, and a map that is found lies
 * inside the file without overlaps. */
Test(distcp, byte_flips)
{
	blob b = cat(three, 3);

	for (size_t i = 0; i < b.len; i += 3) {
		ulp_tensor_map m;

		b.p[i] ^= 0x5a;
		cr_assert_eq(ulp_format_parse(b.p, b.len, &m), ULP_OK);
		for (size_t k = 0; k < m.n; k++) {
			cr_assert_leq(m.v[k].offset + m.v[k].nbytes, b.len);
			if (k)
				cr_assert_leq(m.v[k - 1].offset +
				                      m.v[k - 1].nbytes,
				              m.v[k].offset);
		}
		ulp_tensor_map_free(&m);
		b.p[i] ^= 0x5a;
	}
	free(b.p);
}
