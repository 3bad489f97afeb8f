/*
 * test_s3.c - the S3 client (src/objstore/s3_client.h) against a real
 * server.  Run by tests/s3_client.sh under tests/s3_server.sh, which starts
 * Swift's s3api on loopback and exports AWS_ENDPOINT_URL, the credentials
 * and S3_BUCKET; without them every server test fails (never skips).
 * The configuration tests need no server.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "objstore/s3_client.h"

static ulp_s3_config cfg;
static ulp_s3 *s3;
static char key_prefix[64];

static void need_server(void)
{
	cr_assert(getenv("AWS_ENDPOINT_URL") && getenv("S3_BUCKET"),
	          "no S3 server: run me through tests/s3_client.sh");
	char err[256];
	cr_assert_eq(ulp_s3_config_load(&cfg, err, sizeof err), 0, "%s", err);
	s3 = ulp_s3_open(&cfg, getenv("S3_BUCKET"), err, sizeof err);
	cr_assert(s3, "%s", err);
	snprintf(key_prefix, sizeof key_prefix, "t%d-%ld", (int)getpid(),
	         (long)random());
}

static void done_server(void)
{
	ulp_s3_close(s3);
	ulp_s3_config_free(&cfg);
}

static char *k(const char *name)
{
	static char buf[256];
	snprintf(buf, sizeof buf, "%s/%s", key_prefix, name);
	return buf;
}

static unsigned char *pattern(size_t n, unsigned seed)
{
	unsigned char *b = malloc(n);
	cr_assert(b);
	unsigned x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (unsigned char)(x >> 16);
	}
	return b;
}

TestSuite(s3, .init = need_server, .fini = done_server, .timeout = 120);

Test(s3, put_get_head_delete)
{
	ulp_s3_status st;
	const char *msg = "hello, bucket";
	cr_assert_eq(ulp_s3_put(s3, k("a b+c"), msg, strlen(msg), 0, &st), 0,
	             "%s", st.message);
	uint64_t size = 0;
	cr_assert_eq(ulp_s3_head(s3, k("a b+c"), &size, &st), 0);
	cr_assert_eq(size, strlen(msg));
	void *buf;
	size_t len;
	cr_assert_eq(ulp_s3_get(s3, k("a b+c"), &buf, &len, &st), 0);
	cr_assert_eq(len, strlen(msg));
	cr_assert_arr_eq(buf, msg, len);
	free(buf);
	char part[5];
	size_t got;
	cr_assert_eq(ulp_s3_get_range(s3, k("a b+c"), 7, 5, part, &got, &st),
	             0);
	cr_assert_eq(got, 5);
	cr_assert_arr_eq(part, "bucke", 5);
	/* a range past the end comes back short */
	char tail[64];
	cr_assert_eq(ulp_s3_get_range(s3, k("a b+c"), 10, 64, tail, &got, &st),
	             0);
	cr_assert_eq(got, 3);
	cr_assert_eq(ulp_s3_delete(s3, k("a b+c"), &st), 0);
	cr_assert_eq(ulp_s3_head(s3, k("a b+c"), &size, &st), -ENOENT);
	cr_assert_eq(ulp_s3_get(s3, k("a b+c"), &buf, &len, &st), -ENOENT);
	cr_assert_eq(st.http, 404);
	/* deleting what is gone is not an error (S3's semantics) */
	cr_assert_eq(ulp_s3_delete(s3, k("a b+c"), &st), 0);
}

Test(s3, empty_object)
{
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put(s3, k("empty"), "", 0, 0, &st), 0);
	void *buf;
	size_t len = 99;
	cr_assert_eq(ulp_s3_get(s3, k("empty"), &buf, &len, &st), 0);
	cr_assert_eq(len, 0);
	free(buf);
}

typedef struct seen {
	int n;
	char keys[8][256];
	uint64_t sizes[8];
} seen;

static int collect(void *ctx, const char *key, uint64_t size)
{
	seen *s = ctx;
	if (s->n < 8) {
		snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
		s->sizes[s->n] = size;
	}
	s->n++;
	return 0;
}

static int stop_at_two(void *ctx, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	return ++*(int *)ctx == 2 ? 42 : 0;
}

Test(s3, list_under_prefix)
{
	ulp_s3_status st;
	const char *names[] = { "d/x1", "d/x2", "d/sub/x3", "e/other" };
	for (int i = 0; i < 4; i++)
		cr_assert_eq(ulp_s3_put(s3, k(names[i]), "abc", (size_t)i, 0,
		                        &st),
		             0);
	seen s = { 0 };
	cr_assert_eq(ulp_s3_list(s3, k("d/"), collect, &s, &st), 0, "%s",
	             st.message);
	cr_assert_eq(s.n, 3);
	cr_assert_str_eq(s.keys[0], k("d/sub/x3"));
	cr_assert_eq(s.sizes[0], 2);
	cr_assert_str_eq(s.keys[1], k("d/x1"));
	cr_assert_str_eq(s.keys[2], k("d/x2"));
	cr_assert_eq(s.sizes[2], 1);
	int count = 0;
	cr_assert_eq(ulp_s3_list(s3, key_prefix, stop_at_two, &count, &st), 42);
	seen none = { 0 };
	cr_assert_eq(ulp_s3_list(s3, k("nothing/"), collect, &none, &st), 0);
	cr_assert_eq(none.n, 0);
}

static int tmpfile_with(const unsigned char *data, size_t n)
{
	char path[] = "/tmp/ulps3-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	cr_assert_eq(write(fd, data, n), (ssize_t)n);
	return fd;
}

Test(s3, multipart_parallel_parts)
{
	ulp_s3_close(s3);
	ulp_s3_config c = cfg;
	c.part_size = 5u << 20;
	c.multipart_threshold = 6u << 20;
	c.parts_in_flight = 3;
	char err[256];
	s3 = ulp_s3_open(&c, getenv("S3_BUCKET"), err, sizeof err);
	cr_assert(s3);
	size_t n = (21u << 20) + 12345; /* 5 parts, the last short */
	unsigned char *data = pattern(n, 7);
	int fd = tmpfile_with(data, n);
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put_fd(s3, k("big"), fd, n, &st), 0, "%s %s",
	             st.code, st.message);
	close(fd);
	uint64_t size;
	cr_assert_eq(ulp_s3_head(s3, k("big"), &size, &st), 0);
	cr_assert_eq(size, n);
	void *buf;
	size_t len;
	cr_assert_eq(ulp_s3_get(s3, k("big"), &buf, &len, &st), 0);
	cr_assert_eq(len, n);
	cr_assert(!memcmp(buf, data, n), "multipart object differs");
	free(buf);
	/* a ranged GET across a part boundary */
	unsigned char mid[4096];
	size_t got;
	cr_assert_eq(ulp_s3_get_range(s3, k("big"), (5u << 20) - 2048,
	                              sizeof mid, mid, &got, &st),
	             0);
	cr_assert_eq(got, sizeof mid);
	cr_assert(!memcmp(mid, data + (5u << 20) - 2048, sizeof mid));
	/* to a file, as the object cache fetches */
	char path[] = "/tmp/ulps3-XXXXXX";
	int out = mkstemp(path);
	unlink(path);
	uint64_t wrote = 0;
	cr_assert_eq(ulp_s3_get_fd(s3, k("big"), out, &wrote, &st), 0);
	cr_assert_eq(wrote, n);
	unsigned char *back = malloc(n);
	cr_assert_eq(pread(out, back, n, 0), (ssize_t)n);
	cr_assert(!memcmp(back, data, n));
	close(out);
	free(back);
	free(data);
}

Test(s3, small_file_single_put)
{
	unsigned char *data = pattern(100000, 3);
	int fd = tmpfile_with(data, 100000);
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put_fd(s3, k("small"), fd, 100000, &st), 0);
	close(fd);
	void *buf;
	size_t len;
	cr_assert_eq(ulp_s3_get(s3, k("small"), &buf, &len, &st), 0);
	cr_assert_eq(len, 100000);
	cr_assert(!memcmp(buf, data, len));
	free(buf);
	free(data);
}

Test(s3, if_none_match_or_not_implemented)
{
	ulp_s3_status st;
	int rc = ulp_s3_put(s3, k("lease"), "x", 1, ULP_S3_IF_NONE_MATCH, &st);
	/* Swift's s3api refuses conditional PUTs: 501 NotImplemented */
	if (rc == -ENOTSUP) {
		cr_assert_eq(st.http, 501);
		return;
	}
	cr_assert_eq(rc, 0, "%s", st.message);
	rc = ulp_s3_put(s3, k("lease"), "y", 1, ULP_S3_IF_NONE_MATCH, &st);
	cr_assert_eq(rc, -EEXIST);
}

Test(s3, virtual_hosted_addressing)
{
	/* Swift's storage_domain is "localhost"; curl resolves
	 * BUCKET.localhost to loopback by itself. */
	const char *ep = getenv("AWS_ENDPOINT_URL");
	const char *port = strrchr(ep, ':');
	cr_assert(port);
	char vep[128];
	snprintf(vep, sizeof vep, "http://localhost%s", port);
	ulp_s3_config c = cfg;
	c.endpoint = vep;
	c.path_style = 0;
	char err[256];
	ulp_s3 *v = ulp_s3_open(&c, getenv("S3_BUCKET"), err, sizeof err);
	cr_assert(v, "%s", err);
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put(v, k("vhost"), "vv", 2, 0, &st), 0, "%s %s",
	             st.code, st.message);
	void *buf;
	size_t len;
	/* the path-style client sees the same object */
	cr_assert_eq(ulp_s3_get(s3, k("vhost"), &buf, &len, &st), 0);
	cr_assert_eq(len, 2);
	free(buf);
	ulp_s3_close(v);
}

Test(s3, wrong_credentials_are_403)
{
	ulp_s3_config c = cfg;
	c.secret_key = "not-the-secret";
	char err[256];
	ulp_s3 *bad = ulp_s3_open(&c, getenv("S3_BUCKET"), err, sizeof err);
	cr_assert(bad);
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put(bad, k("x"), "x", 1, 0, &st), -EACCES);
	cr_assert_eq(st.http, 403);
	cr_assert_str_eq(st.code, "SignatureDoesNotMatch");
	char line[512];
	cr_assert(strstr(ulp_s3_strstatus(&st, line, sizeof line), "403"));
	ulp_s3_close(bad);
	c = cfg;
	c.access_key = "nobody:nobody";
	bad = ulp_s3_open(&c, getenv("S3_BUCKET"), err, sizeof err);
	cr_assert_eq(ulp_s3_head(bad, k("x"), NULL, &st), -EACCES);
	ulp_s3_close(bad);
}

Test(s3, missing_bucket)
{
	char err[256];
	ulp_s3 *nb = ulp_s3_open(&cfg, "no-such-bucket-here", err, sizeof err);
	cr_assert(nb);
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put(nb, "k", "x", 1, 0, &st), -ENXIO);
	cr_assert_str_eq(st.code, "NoSuchBucket");
	seen s = { 0 };
	cr_assert_eq(ulp_s3_list(nb, "", collect, &s, &st), -ENXIO);
	ulp_s3_close(nb);
}

Test(s3, unreachable_server_is_transient)
{
	ulp_s3_config c = cfg;
	c.endpoint = "http://127.0.0.1:1";
	c.max_attempts = 2;
	char err[256];
	ulp_s3 *dead = ulp_s3_open(&c, getenv("S3_BUCKET"), err, sizeof err);
	cr_assert(dead);
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put(dead, "k", "x", 1, 0, &st), -EAGAIN);
	cr_assert_eq(st.http, 0);
	cr_assert_str_eq(st.code, "network");
	ulp_s3_close(dead);
}

/* ------------------------------------------------------- configuration */

static void clear_aws_env(void)
{
	const char *vars[] = {
		"AWS_ACCESS_KEY_ID",  "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN",  "AWS_REGION",
		"AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
		"AWS_PROFILE",        "ULPFS_S3_ADDRESSING",
		"AWS_CONFIG_FILE",    "AWS_SHARED_CREDENTIALS_FILE"
	};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

Test(s3_config, aws_files_default_profile)
{
	clear_aws_env();
	char home[] = "/tmp/ulps3home-XXXXXX";
	cr_assert(mkdtemp(home));
	char p[512];
	snprintf(p, sizeof p, "%s/.aws", home);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/.aws/credentials", home);
	write_file(p, "[other]\naws_access_key_id = NO\n"
	              "[default]\naws_access_key_id = AK\n"
	              "aws_secret_access_key = SK\naws_session_token = TOK\n");
	snprintf(p, sizeof p, "%s/.aws/config", home);
	write_file(p, "[default]\nregion = eu-west-3\n"
	              "endpoint_url = https://objects.example.org/\n"
	              "s3 =\n  addressing_style = virtual\n");
	setenv("HOME", home, 1);
	ulp_s3_config c;
	char err[256];
	cr_assert_eq(ulp_s3_config_load(&c, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(c.access_key, "AK");
	cr_assert_str_eq(c.secret_key, "SK");
	cr_assert_str_eq(c.session_token, "TOK");
	cr_assert_str_eq(c.region, "eu-west-3");
	cr_assert_str_eq(c.endpoint, "https://objects.example.org");
	cr_assert_eq(c.path_style, 0);
	ulp_s3_config_free(&c);
	/* the environment wins over the files */
	setenv("AWS_ACCESS_KEY_ID", "ENVAK", 1);
	setenv("AWS_REGION", "ap-south-1", 1);
	unlink(p); /* no config: AWS's own endpoint, virtual-hosted */
	cr_assert_eq(ulp_s3_config_load(&c, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(c.access_key, "ENVAK");
	cr_assert_str_eq(c.secret_key, "SK");
	cr_assert_str_eq(c.endpoint, "https://s3.ap-south-1.amazonaws.com");
	cr_assert_eq(c.path_style, 0);
	ulp_s3_config_free(&c);
	snprintf(p, sizeof p, "rm -rf '%s'", home);
	cr_assert_eq(system(p), 0);
}

Test(s3_config, refusals)
{
	clear_aws_env();
	setenv("HOME", "/nonexistent", 1);
	ulp_s3_config c;
	char err[256];
	cr_assert_eq(ulp_s3_config_load(&c, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "AWS_ACCESS_KEY_ID"), "%s", err);
	setenv("AWS_ACCESS_KEY_ID", "a", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "b", 1);
	setenv("AWS_ENDPOINT_URL", "http://s3.example.org", 1);
	cr_assert_eq(ulp_s3_config_load(&c, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "loopback"), "%s", err);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
	cr_assert_eq(ulp_s3_config_load(&c, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(c.endpoint, "http://127.0.0.1:9000");
	cr_assert_eq(c.path_style, 1);
	cr_assert_null(ulp_s3_open(&c, "Bad_Bucket", err, sizeof err));
	cr_assert(strstr(err, "bucket name"), "%s", err);
	ulp_s3_config_free(&c);
}

/* tests/s3_client.sh then fetches it with awscli and s3cmd. */
Test(s3, interop_upload)
{
	const char *path = getenv("S3_INTEROP_FILE");
	cr_assert(path, "S3_INTEROP_FILE not set (run tests/s3_client.sh)");
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0);
	off_t n = lseek(fd, 0, SEEK_END);
	ulp_s3_status st;
	cr_assert_eq(ulp_s3_put_fd(s3, "interop/by-ulpfs", fd, (uint64_t)n,
	                           &st),
	             0, "%s", st.message);
	close(fd);
}
