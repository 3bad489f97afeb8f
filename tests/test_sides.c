/*
 * test_sides.c - unit tests of sides in the store: an optimizer file whose
 * fp32 master weights are coded given the bf16 weights of the model file
 * beside it.
 *
 * The side is the model version of the same checkpoint, also for files
 * overwritten in place and after flips; it is added by a flip when the
 * model came second; a missing, unparsable, mismatched or foreign model
 * gives no side, a reordered one still does; deleting or pruning the model
 * never leaves an optimizer version unreadable, and gc codes it again
 * without the side so that the model's object goes; a damaged side is an
 * error, never wrong bytes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "store/store.h"
#include "ulpfs/ulp.h"

#include "test_store_util.h"

TestSuite(sides, .init = setup, .fini = teardown);

#define NP 3          /* parameters */
#define PN (16 << 10) /* elements of each */

/* One tensor of a file built by st_build. */
typedef struct tspec {
	const char *name;
	const char *dtype; /* "BF16" or "F32" */
	size_t n;          /* elements */
	const void *data;
} tspec;

/* A safetensors file of the tensors in s, in that order. */
static sfile st_build(const tspec *s, size_t n)
{
	char json[4096];
	size_t off = 0, hl = 0;
	sfile f = { 0 };

	hl += (size_t)snprintf(json + hl, sizeof json - hl, "{");
	for (size_t i = 0; i < n; i++) {
		size_t b = s[i].n * (strcmp(s[i].dtype, "BF16") ? 4 : 2);
		hl += (size_t)snprintf(json + hl, sizeof json - hl,
		                       "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%"
		                       "zu]"
		                       ",\"data_offsets\":[%zu,%zu]}",
		                       i ? "," : "", s[i].name, s[i].dtype,
		                       s[i].n, off, off + b);
		off += b;
	}
	hl += (size_t)snprintf(json + hl, sizeof json - hl, "}");
	cr_assert_lt(hl, sizeof json);
	size_t hlen = hl + (8 - hl % 8) % 8;
	f.data = 8 + hlen;
	f.len = f.data + off;
	f.p = malloc(f.len);
	cr_assert(f.p);
	for (int i = 0; i < 8; i++)
		f.p[i] = (uint8_t)(hlen >> (8 * i));
	memcpy(f.p + 8, json, hl);
	memset(f.p + 8 + hl, ' ', hlen - hl);
	off = f.data;
	for (size_t i = 0; i < n; i++) {
		size_t b = s[i].n * (strcmp(s[i].dtype, "BF16") ? 4 : 2);
		memcpy(f.p + off, s[i].data, b);
		off += b;
	}
	return f;
}

static uint16_t rne(uint32_t u)
{
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The state of a training run: fp32 masters and Adam moments. */
typedef struct run {
	uint32_t master[NP][PN];
	uint32_t m[NP][PN], v[NP][PN];
	uint16_t bf[NP][PN];
	uint64_t seed;
} run;

static void run_init(run *r, uint64_t seed)
{
	r->seed = seed;
	for (int k = 0; k < NP; k++)
		for (size_t i = 0; i < PN; i++) {
			uint64_t x = rng_next(&r->seed);
			/* about +-0.02, every mantissa bit busy */
			r->master[k][i] = 0x3c000000u +
			                  (uint32_t)(x & 0xffffff) +
			                  ((uint32_t)(x >> 40 & 1) << 31);
		}
}

/* A training step: every master moves by up to 2^18 ULPs (more than a
 * bf16 ULP now and then), fresh moments. */
static void run_step(run *r)
{
	for (int k = 0; k < NP; k++)
		for (size_t i = 0; i < PN; i++) {
			uint64_t x = rng_next(&r->seed);
			uint32_t d = (uint32_t)(x & 0x3ffff);
			r->master[k][i] += (x >> 20 & 1) ? d : (uint32_t)-d;
			r->m[k][i] =
				0x35000000u + (uint32_t)(x >> 24 & 0xffffff);
			r->v[k][i] =
				0x2c000000u + (uint32_t)(x >> 32 & 0xffffff);
			r->bf[k][i] = rne(r->master[k][i]);
		}
}

static const char *pname[NP] = { "b.weight", "c.weight", "a.weight" };

/* model.safetensors: the bf16 weights sorted by name (a, b, c), or with
 * reorder in the parameters' order. */
static sfile model_file(const run *r, int reorder)
{
	tspec s[NP];
	for (int k = 0; k < NP; k++) {
		int j = reorder ? k : (k + 2) % NP; /* a, b, c */
		s[k] = (tspec){ pname[j], "BF16", PN, r->bf[j] };
	}
	return st_build(s, NP);
}

/* optimizer.pt (a safetensors body, which the store parses the same):
 * per parameter exp_avg and exp_avg_sq, then the fp32 masters. */
static sfile optim_file(const run *r)
{
	tspec s[3 * NP];
	static char names[3 * NP][32];
	for (int k = 0; k < NP; k++) {
		snprintf(names[2 * k], 32, "state.%d.exp_avg", k);
		snprintf(names[2 * k + 1], 32, "state.%d.exp_avg_sq", k);
		snprintf(names[2 * NP + k], 32, "master.%d", k);
		s[2 * k] = (tspec){ names[2 * k], "F32", PN, r->m[k] };
		s[2 * k + 1] = (tspec){ names[2 * k + 1], "F32", PN, r->v[k] };
		s[2 * NP + k] =
			(tspec){ names[2 * NP + k], "F32", PN, r->master[k] };
	}
	return st_build(s, 3 * NP);
}

/* A checkpoint directory name under the root (created once). */
static uint64_t dir_of(ulp_store *st, const char *name)
{
	ulp_attr a;
	if (ulp_ns_lookup(st, ULP_ROOT_INO, name, &a) == 0)
		return a.ino;
	return mkdir_in(st, ULP_ROOT_INO, name);
}

typedef struct ckpt {
	sfile model, optim;
	uint64_t mino, oino;
} ckpt;

/* Save a checkpoint into dir: the model first, as Trainer does. */
static ckpt save(ulp_store *st, uint64_t dir, const run *r)
{
	ckpt c = { model_file(r, 0), optim_file(r), 0, 0 };
	c.mino = put_file(st, dir, "model.safetensors", c.model.p, c.model.len);
	c.oino = put_file(st, dir, "optimizer.pt", c.optim.p, c.optim.len);
	return c;
}

static void ckpt_free(ckpt *c)
{
	free(c->model.p);
	free(c->optim.p);
}

Test(sides, optimizer_is_coded_given_the_model_beside_it)
{
	uint64_t stored[2];
	for (int no_side = 0; no_side < 2; no_side++) {
		ulp_store_opts o = { .settle_ms = 1,
			             .encoder_threads = 2,
			             .cache_bytes = 8u << 20,
			             .no_side = no_side };
		ulp_store *st = open_opts(&o);
		run r;
		run_init(&r, 1);
		run_step(&r);
		ckpt c = save(st, dir_of(st, "checkpoint-1"), &r);
		sync_ok(st);
		ulp_version_info ov = current(st, c.oino);
		ulp_version_info mv = current(st, c.mino);
		cr_assert_eq(ov.side, no_side ? 0 : mv.id,
		             "optimizer side %llu, model version %llu",
		             (unsigned long long)ov.side,
		             (unsigned long long)mv.id);
		cr_assert_eq(mv.side, 0, "a model has no side");
		expect_content(st, c.oino, c.optim.p, c.optim.len);
		stored[no_side] = ov.stored;
		check_integrity(st);
		ulp_store_close(st);
		/* and after a reopen, with nothing cached */
		st = open_opts(&o);
		expect_content(st, c.oino, c.optim.p, c.optim.len);
		ulp_store_close(st);
		ckpt_free(&c);
		teardown();
		setup();
	}
	/* The masters are a third of the file: 16 bits instead of ~32 */
	cr_assert_lt(stored[0] * 100, stored[1] * 90,
	             "with the side %llu bytes, without %llu",
	             (unsigned long long)stored[0],
	             (unsigned long long)stored[1]);
}

Test(sides, a_missing_or_unfit_model_gives_no_side)
{
	ulp_store *st = open_default();
	run r;
	run_init(&r, 2);
	run_step(&r);
	sfile optim = optim_file(&r);

	/* no model at all */
	uint64_t d0 = dir_of(st, "none");
	uint64_t o0 = put_file(st, d0, "optimizer.pt", optim.p, optim.len);
	/* a model that does not parse */
	uint64_t d1 = dir_of(st, "corrupt");
	sfile bad = model_file(&r, 0);
	memset(bad.p, 0xff, 8); /* header length beyond the file */
	put_file(st, d1, "model.safetensors", bad.p, bad.len);
	uint64_t o1 = put_file(st, d1, "optimizer.pt", optim.p, optim.len);
	/* a model of other shapes */
	uint64_t d2 = dir_of(st, "shapes");
	tspec sh[1] = { { "w", "BF16", PN + 1, NULL } };
	uint16_t *z = calloc(PN + 1, 2);
	sh[0].data = z;
	sfile other = st_build(sh, 1);
	put_file(st, d2, "model.safetensors", other.p, other.len);
	uint64_t o2 = put_file(st, d2, "optimizer.pt", optim.p, optim.len);
	/* the model of another step */
	uint64_t d3 = dir_of(st, "stale");
	sfile stale = model_file(&r, 0);
	run_step(&r);
	sfile optim3 = optim_file(&r);
	put_file(st, d3, "model.safetensors", stale.p, stale.len);
	uint64_t o3 = put_file(st, d3, "optimizer.pt", optim3.p, optim3.len);
	/* a model in another order: matched all the same */
	uint64_t d4 = dir_of(st, "reordered");
	sfile re = model_file(&r, 1);
	uint64_t m4 = put_file(st, d4, "model.safetensors", re.p, re.len);
	uint64_t o4 = put_file(st, d4, "optimizer.pt", optim3.p, optim3.len);
	sync_ok(st);

	cr_assert_eq(current(st, o0).side, 0, "side without a model");
	cr_assert_eq(current(st, o1).side, 0, "side from an unparsable model");
	cr_assert_eq(current(st, o2).side, 0, "side from other shapes");
	cr_assert_eq(current(st, o3).side, 0, "side from another step");
	cr_assert_eq(current(st, o4).side, current(st, m4).id,
	             "no side from a reordered model");
	expect_content(st, o0, optim.p, optim.len);
	expect_content(st, o1, optim.p, optim.len);
	expect_content(st, o2, optim.p, optim.len);
	expect_content(st, o3, optim3.p, optim3.len);
	expect_content(st, o4, optim3.p, optim3.len);
	check_integrity(st);
	ulp_store_close(st);
	free(optim.p);
	free(optim3.p);
	free(bad.p);
	free(z);
	free(other.p);
	free(stale.p);
	free(re.p);
}

static int count_state(void *opaque, const ulp_version_info *v,
                       const char *path)
{
	int *n = opaque;
	(void)path;
	n[v->state]++;
	return 0;
}

Test(sides, a_deleted_model_never_leaves_the_optimizer_unreadable)
{
	ulp_store *st = open_default();
	run r;
	run_init(&r, 3);
	run_step(&r);
	uint64_t d = dir_of(st, "checkpoint-1");
	ckpt c = save(st, d, &r);
	sync_ok(st);
	ulp_version_info mv = current(st, c.mino);
	cr_assert_eq(current(st, c.oino).side, mv.id);

	/* rotation deletes the model first */
	cr_assert_eq(ulp_ns_unlink(st, d, "model.safetensors"), 0);
	ulp_version_info g;
	cr_assert_eq(ulp_version_get(st, mv.id, &g), 0);
	cr_assert_neq(g.state, ULP_VERSION_DELETED,
	              "a side still named was deleted");
	expect_content(st, c.oino, c.optim.p, c.optim.len);

	/* gc codes the optimizer again without it; then the model goes */
	settle_all(st);
	cr_assert_eq(current(st, c.oino).side, 0, "still coded given a ghost");
	cr_assert_eq(ulp_version_get(st, mv.id, &g), 0);
	cr_assert_eq(g.state, ULP_VERSION_DELETED, "the ghost stays");
	expect_content(st, c.oino, c.optim.p, c.optim.len);
	check_integrity(st);
	int n[3] = { 0 };
	cr_assert_eq(ulp_version_list(st, NULL, count_state, n), 0);
	cr_assert_eq(n[ULP_VERSION_GHOST], 0);
	ulp_store_close(st);
	st = open_default();
	expect_content(st, c.oino, c.optim.p, c.optim.len);
	ulp_store_close(st);
	ckpt_free(&c);
}

static int collect_ids(void *opaque, const ulp_version_info *v,
                       const char *path)
{
	ulp_version_info *out = opaque;
	(void)path;
	if (v->state == ULP_VERSION_LIVE && v->seq <= 8)
		out[v->seq - 1] = *v;
	return 0;
}

Test(sides, in_place_saves_and_prune_keep_every_version_exact)
{
	ulp_store *st = open_default();
	run r;
	run_init(&r, 4);
	uint64_t d = dir_of(st, "latest");
	ckpt c[4];
	for (int i = 0; i < 4; i++) {
		run_step(&r);
		c[i] = save(st, d, &r);
		sync_ok(st); /* each save committed before the next */
	}
	settle_all(st); /* older versions flipped against their successors */
	ulp_version_info mv[8] = { 0 }, ov[8] = { 0 };
	cr_assert_eq(ulp_version_list(st, "latest/model.safetensors",
	                              collect_ids, mv),
	             0);
	cr_assert_eq(ulp_version_list(st, "latest/optimizer.pt", collect_ids,
	                              ov),
	             0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(ov[i].side, mv[i].id,
		             "optimizer version %d: side %llu, its model %llu",
		             i + 1, (unsigned long long)ov[i].side,
		             (unsigned long long)mv[i].id);
		if (i < 3)
			cr_assert_eq(ov[i].ref, ov[i + 1].id,
			             "not flipped against its successor");
		expect_version(st, ov[i].id, c[i].optim.p, c[i].optim.len);
	}

	/* drop the older models: their optimizer versions stay exact */
	uint64_t dropped = 0;
	cr_assert_eq(ulp_version_prune(st, "latest/model.safetensors", 1, 0,
	                               &dropped),
	             0);
	cr_assert_eq(dropped, 3);
	for (int i = 0; i < 4; i++)
		expect_version(st, ov[i].id, c[i].optim.p, c[i].optim.len);
	settle_all(st);
	memset(ov, 0, sizeof ov);
	cr_assert_eq(ulp_version_list(st, "latest/optimizer.pt", collect_ids,
	                              ov),
	             0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(ov[i].side, i == 3 ? mv[3].id : 0,
		             "optimizer version %d: side %llu", i + 1,
		             (unsigned long long)ov[i].side);
		expect_version(st, ov[i].id, c[i].optim.p, c[i].optim.len);
	}
	check_integrity(st);
	ulp_store_close(st);
	for (int i = 0; i < 4; i++)
		ckpt_free(&c[i]);
}

Test(sides, a_flip_adds_the_side_a_first_commit_could_not_have)
{
	ulp_store *st = open_default();
	run r;
	run_init(&r, 5);
	run_step(&r);
	/* the optimizer is committed before its model exists */
	uint64_t d1 = dir_of(st, "checkpoint-1");
	sfile o1 = optim_file(&r), m1 = model_file(&r, 0);
	uint64_t oi1 = put_file(st, d1, "optimizer.pt", o1.p, o1.len);
	sync_ok(st);
	cr_assert_eq(current(st, oi1).side, 0);
	uint64_t mi1 = put_file(st, d1, "model.safetensors", m1.p, m1.len);
	sync_ok(st);
	/* the next checkpoint makes checkpoint-1's optimizer flip */
	run_step(&r);
	ckpt c2 = save(st, dir_of(st, "checkpoint-2"), &r);
	settle_all(st);
	ulp_version_info v1 = current(st, oi1);
	cr_assert_eq(v1.ref, current(st, c2.oino).id, "not flipped");
	cr_assert_eq(v1.side, current(st, mi1).id, "the flip added no side");
	cr_assert_eq(current(st, c2.oino).side, current(st, c2.mino).id);
	expect_content(st, oi1, o1.p, o1.len);
	expect_content(st, c2.oino, c2.optim.p, c2.optim.len);
	check_integrity(st);
	ulp_store_close(st);
	free(o1.p);
	free(m1.p);
	ckpt_free(&c2);
}

/* The path of version v's object. */
static void object_path(const ulp_version_info *v, char *p, size_t n)
{
	snprintf(p, n, "%s/objects/%s", store_dir(), v->object);
}

Test(sides, a_damaged_side_is_an_error_never_wrong_bytes)
{
	ulp_store *st = open_default();
	run r;
	run_init(&r, 6);
	run_step(&r);
	ckpt c = save(st, dir_of(st, "checkpoint-1"), &r);
	sync_ok(st);
	ulp_version_info mv = current(st, c.mino), ov = current(st, c.oino);
	cr_assert_eq(ov.side, mv.id);
	ulp_store_close(st);

	/* one byte of the model's payload */
	char p[512];
	object_path(&mv, p, sizeof p);
	int fd = open(p, O_RDWR);
	cr_assert_geq(fd, 0);
	uint8_t b;
	off_t at = (off_t)(mv.stored / 2);
	cr_assert_eq(pread(fd, &b, 1, at), 1);
	b ^= 0x10;
	cr_assert_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);

	st = open_default();
	uint8_t *buf = malloc(ov.size + 1);
	cr_assert(buf);
	ssize_t n = ulp_version_read(st, ov.id, buf, ov.size, 0);
	cr_assert(n < 0 || memcmp(buf, c.optim.p, ov.size) == 0, "wrong bytes "
	                                                         "read");
	cr_assert_lt(n, 0, "a damaged side went unnoticed");
	free(buf);
	ulp_store_close(st);
	ckpt_free(&c);
}

Test(sides, a_provider_is_never_coded_against_its_own_user)
{
	/* A copy of the model under another name has its layout: the model
	 * is its predecessor, to be flipped against it, while the copy (not
	 * named *.safetensors) is coded given the model.  Coding the model
	 * against the copy would make each need the other. */
	ulp_store *st = open_default();
	run r;
	run_init(&r, 7);
	run_step(&r);
	uint64_t d = dir_of(st, "checkpoint-1");
	sfile o = optim_file(&r);
	uint64_t mi = put_file(st, d, "model.safetensors", o.p, o.len);
	sync_ok(st);
	uint64_t ci = put_file(st, d, "model.safetensors.copy", o.p, o.len);
	settle_all(st);
	ulp_version_info mv = current(st, mi), cv = current(st, ci);
	cr_assert(!(mv.ref == cv.id && cv.side == mv.id), "the model is coded "
	                                                  "against the copy "
	                                                  "coded given it");
	expect_content(st, mi, o.p, o.len);
	expect_content(st, ci, o.p, o.len);
	check_integrity(st);
	ulp_store_close(st);
	st = open_default();
	expect_content(st, mi, o.p, o.len);
	expect_content(st, ci, o.p, o.len);
	ulp_store_close(st);
	free(o.p);
}
