/*
 * cmd_pack.c - `ulpfs pack` and `ulpfs unpack`: the codec, offline.
 *
 * Output goes to a temporary file beside the target, renamed into place
 * only once complete, so an interrupted run never leaves a half object
 * (or half file) under the requested name.  "-o -" streams to stdout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

typedef struct out_file {
	const char *path;
	char *tmp;
	int fd;
} out_file;

static int out_open(out_file *o, const char *path)
{
	o->path = path;
	o->tmp = NULL;
	if (strcmp(path, "-") == 0) {
		o->fd = STDOUT_FILENO;
		return 0;
	}
	if (asprintf(&o->tmp, "%s.ulpfs-tmp-XXXXXX", path) < 0) {
		o->tmp = NULL;
		cli_err("%s: out of memory", path);
		return -1;
	}
	o->fd = mkostemp(o->tmp, O_CLOEXEC);
	if (o->fd < 0) {
		cli_err("%s: %s", path, strerror(errno));
		free(o->tmp);
		o->tmp = NULL;
		return -1;
	}
	return 0;
}

/* Finish (ok) or abandon the output. */
static int out_close(out_file *o, int ok)
{
	int rc = 0;
	if (!o->tmp)
		return ok ? 0 : -1;
	if (ok && (fchmod(o->fd, 0644) < 0 || fsync(o->fd) < 0)) {
		cli_err("%s: %s", o->path, strerror(errno));
		ok = 0;
	}
	if (close(o->fd) < 0 && ok) {
		cli_err("%s: %s", o->path, strerror(errno));
		ok = 0;
	}
	if (ok && rename(o->tmp, o->path) < 0) {
		cli_err("%s: %s", o->path, strerror(errno));
		ok = 0;
	}
	if (!ok) {
		unlink(o->tmp);
		rc = -1;
	}
	free(o->tmp);
	o->tmp = NULL;
	return rc;
}

static void pack_usage(FILE *f)
{
	fputs("usage: ulpfs pack [--ref OLD] [--threads N] [--chunk-size "
	      "SIZE]\n"
	      "                  [--level L] IN -o OUT\n"
	      "Encode IN (as a delta against OLD when given) into the object "
	      "OUT.\n"
	      "  --ref OLD         the previous version of the file\n"
	      "  --threads N       encoder threads (default: one per CPU)\n"
	      "  --chunk-size SIZE logical bytes per chunk (default 2M)\n"
	      "  --level L         zstd level for non-float bytes "
	      "(default: adaptive)\n"
	      "  -o OUT            output object; - for stdout\n",
	      f);
}

static const struct option pack_opts[] = {
	{ "ref", required_argument, NULL, 'r' },
	{ "threads", required_argument, NULL, 't' },
	{ "chunk-size", required_argument, NULL, 'c' },
	{ "level", required_argument, NULL, 'l' },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* The options pack and unpack share (unpack accepts only -r -t -o). */
typedef struct pack_args {
	const char *ref_path, *out_path, *in_path;
	unsigned threads, level;
	uint32_t chunk;
} pack_args;

/* Parse argv into a: -1 to go on, else the exit code (after --help or a
 * usage error). */
static int pack_args_parse(const char *cmd, const char *shortopts,
                           void (*usage)(FILE *), int argc, char **argv,
                           pack_args *a)
{
	int c;

	memset(a, 0, sizeof *a);
	while ((c = getopt_long(argc, argv, shortopts, pack_opts, NULL)) !=
	       -1) {
		/* pack_opts holds both commands' long options: getopt_long
		 * accepts unpack --level unless it is refused here */
		if (c != '?' && !strchr(shortopts, c)) {
			const struct option *o = pack_opts;
			while (o->name && o->val != c)
				o++;
			cli_err("%s: --%s is an option of pack only", cmd,
			        o->name ? o->name : "?");
			usage(stderr);
			return CLI_USAGE;
		}
		switch (c) {
		case 'r':
			a->ref_path = optarg;
			break;
		case 't':
			if (cli_parse_uint(optarg, 256, &a->threads) < 0) {
				cli_err("%s: bad --threads '%s'", cmd, optarg);
				return CLI_USAGE;
			}
			break;
		case 'c':
			if (cli_parse_chunk_size(cmd, optarg, &a->chunk) < 0)
				return CLI_USAGE;
			break;
		case 'l':
			if (cli_parse_uint(optarg, 22, &a->level) < 0 ||
			    !a->level) {
				cli_err("%s: --level must be 1..22", cmd);
				return CLI_USAGE;
			}
			break;
		case 'o':
			a->out_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return CLI_OK;
		default:
			usage(stderr);
			return CLI_USAGE;
		}
	}
	if (optind != argc - 1 || !a->out_path) {
		usage(stderr);
		return CLI_USAGE;
	}
	a->in_path = argv[optind];
	return -1;
}

int cmd_pack(int argc, char **argv)
{
	ulp_encode_job job = { 0 };
	pack_args a;
	int done = pack_args_parse("pack", "r:t:c:l:o:h", pack_usage, argc,
	                           argv, &a);

	if (done >= 0)
		return done;
	const char *ref_path = a.ref_path, *out_path = a.out_path;

	cli_map in, ref = { 0 };
	ulp_tensor_map in_map = { 0 }, ref_map = { 0 };
	uint8_t ref_hash[16];
	cli_progress prog;
	out_file out;
	ulp_stats st;
	uint64_t obj_size;
	int rc, ok = 0;

	if (cli_map_open(&in, a.in_path) < 0)
		return CLI_FAIL;
	if (ref_path && cli_map_open(&ref, ref_path) < 0) {
		cli_map_close(&in);
		return CLI_FAIL;
	}
	if (ulp_format_parse(in.data, in.size, &in_map) ||
	    (ref_path && ulp_format_parse(ref.data, ref.size, &ref_map))) {
		cli_err("pack: out of memory");
		goto done;
	}
	if (ref_path)
		ulp_content_hash(ULP_HASH_TREE, ref.data, ref.size, ref_hash);
	if (out_open(&out, out_path) < 0)
		goto done;
	cli_progress_init(&prog, "pack");
	job.cur = in.data;
	job.cur_size = in.size;
	job.cur_map = &in_map;
	job.has_ref = ref_path != NULL;
	job.ref_size = ref.size;
	job.ref_map = &ref_map;
	job.ref_hash = ref_hash;
	job.ref_read = cli_map_read;
	job.ref_opaque = &ref;
	job.params.chunk_size = a.chunk;
	job.params.generic_level = (int)a.level;
	job.nthreads = a.threads;
	job.pool = cli_pool(a.threads); /* NULL: threads of its own */
	job.write = cli_fd_write;
	job.write_opaque = &out.fd;
	job.progress = cli_progress_cb;
	job.progress_opaque = &prog;
	rc = ulp_encode_file(&job, &st, NULL, &obj_size);
	cli_progress_end(&prog);
	if (rc)
		cli_err("%s: %s", out_path,
		        rc == ULP_ERR_IO ? strerror(errno) : ulp_strerror(rc));
	ok = out_close(&out, rc == ULP_OK) == 0;
done:
	ulp_tensor_map_free(&in_map);
	ulp_tensor_map_free(&ref_map);
	cli_map_close(&in);
	cli_map_close(&ref);
	return ok ? CLI_OK : CLI_FAIL;
}

static void unpack_usage(FILE *f)
{
	fputs("usage: ulpfs unpack [--ref OLD] [--threads N] IN -o OUT\n"
	      "Decode the object IN (packed against OLD, if it was) into "
	      "OUT.\n",
	      f);
}

int cmd_unpack(int argc, char **argv)
{
	pack_args a;
	int done = pack_args_parse("unpack", "r:t:o:h", unpack_usage, argc,
	                           argv, &a);

	if (done >= 0)
		return done;
	const char *in_path = a.in_path, *ref_path = a.ref_path,
		   *out_path = a.out_path;
	cli_map ref = { 0 };
	ulp_object *obj = NULL;
	struct stat st;
	out_file out;
	int ok = 0, rc;
	int fd = open(in_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		cli_err("%s: %s", in_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return CLI_FAIL;
	}
	rc = ulp_object_open(cli_fd_read_at, &fd, (uint64_t)st.st_size, &obj);
	if (rc) {
		cli_err("%s: %s", in_path, ulp_strerror(rc));
		close(fd);
		return CLI_FAIL;
	}
	if (ref_path && cli_map_open(&ref, ref_path) < 0)
		goto done;
	if (cli_check_ref(obj, ref_path ? &ref : NULL, in_path) < 0)
		goto done;
	if (out_open(&out, out_path) < 0)
		goto done;
	rc = cli_decode_all(obj, ulp_object_has_ref(obj) ? &ref : NULL,
	                    a.threads, NULL, NULL, out.fd);
	if (rc)
		cli_err("%s: %s", rc == ULP_ERR_IO ? out_path : in_path,
		        rc == ULP_ERR_IO ? strerror(errno) : ulp_strerror(rc));
	ok = out_close(&out, rc == ULP_OK) == 0;
done:
	ulp_object_close(obj);
	cli_map_close(&ref);
	close(fd);
	return ok ? CLI_OK : CLI_FAIL;
}
