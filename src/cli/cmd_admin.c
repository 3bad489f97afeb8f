/*
 * cmd_admin.c - the store commands of the helper: log, snapshot, sync,
 * stats, verify, gc, prune, restore, cat, export.  Each parses its
 * arguments, finds the store (cli_target.c) and runs a request through
 * the executor (ctl_exec.c), by the daemon when one holds the store.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_target.h"
#include "stats_svg.h"

typedef struct cmd_opts {
	const char *store, *snapshot, *svg;
	int json, chain, help, zstd19;
	unsigned keep_last, keep_every, threads;
	int have_keep_last;
} cmd_opts;

typedef struct usage_text {
	const char *name, *allowed, *text;
} usage_text;

static const usage_text usages[] = {
	{ "log", "sjc",
	  "usage: ulpfs log [--store DIR] [--json] [--chain] PATH[@N]\n"
	  "List every version of PATH (oldest first): number, time, size, "
	  "stored size,\nratio, reference, chain depth, keyframe, hash.  "
	  "--chain follows the\nreference lineage of the newest version (or "
	  "of version N) across paths.\n" },
	{ "snapshot", "sj",
	  "usage: ulpfs snapshot create NAME [PATH...]\n"
	  "       ulpfs snapshot list [--json]\n"
	  "       ulpfs snapshot show [--json] NAME\n"
	  "       ulpfs snapshot delete NAME\n"
	  "Pin the current version of every file (or of the given subtrees); "
	  "pinned\nversions survive deletion, gc and prune, and are readable "
	  "under\nMOUNT/.ulpfs/snapshots/NAME/.  Every form takes --store "
	  "DIR.\n" },
	{ "sync", "s",
	  "usage: ulpfs sync [--store DIR] [MOUNTPOINT]\n"
	  "Return once every file closed so far is encoded and committed.\n" },
	{ "stats", "sjztg",
	  "usage: ulpfs stats [--store DIR] [--json] [--zstd19 [--threads N]] "
	  "[--svg FILE] [PATH]\n"
	  "Logical and physical bytes, by file kind, dtype and codec path; "
	  "chain\ndepths; ghosts waiting for rebase; the decoded-chunk cache "
	  "when mounted.\n--zstd19 also compresses every stored version with "
	  "zstd -19 (N threads,\ndefault: one per CPU; each figure is kept in "
	  "the catalog, so only new\nversions cost time) and compares the "
	  "store with it.\n--svg FILE also writes a chart (SVG) of each "
	  "checkpoint's raw and stored\nbytes, and its zstd -19 bytes with "
	  "--zstd19, in the order written; a\ncheckpoint is a directory's "
	  "files (the k-th version of each, where files are\noverwritten in "
	  "place).  --json then adds the figures as \"by_checkpoint\".\n" },
	{ "verify", "s",
	  "usage: ulpfs verify [--store DIR] [PATH]\n"
	  "Decode every live and pinned version and check its hash; exits 1 "
	  "naming\neach version that fails.\n" },
	{ "gc", "s",
	  "usage: ulpfs gc [--store DIR] [PATH]\n"
	  "Rebase every version coded against a deleted one now.\n" },
	{ "prune", "skK",
	  "usage: ulpfs prune --keep-last N [--keep-every M] [--store DIR] "
	  "PATH...\n"
	  "Drop old versions of each PATH: keep the newest N, every M-th, the "
	  "current\nversion of a live file and pinned versions.\n" },
	{ "restore", "sS",
	  "usage: ulpfs restore [--store DIR] --snapshot NAME\n"
	  "Bring a snapshot's files back into the live tree as new "
	  "versions.\n" },
	{ "cat", "s",
	  "usage: ulpfs cat [--store DIR] PATH[@N]\n"
	  "Write version N (default: the newest) of PATH to stdout.\n" },
	{ "export", "sS",
	  "usage: ulpfs export [--store DIR] PATH[@N] DEST\n"
	  "       ulpfs export [--store DIR] --snapshot NAME DESTDIR\n"
	  "Write plain files (mtimes preserved).\n" },
};

static const usage_text *usage_of(const char *cmd)
{
	for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++)
		if (strcmp(usages[i].name, cmd) == 0)
			return &usages[i];
	return NULL;
}

/* Parse options; returns -1 to go on, else an exit code. */
static int parse(int argc, char **argv, cmd_opts *o)
{
	static const struct option lo[] = {
		{ "store", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "chain", no_argument, NULL, 'c' },
		{ "keep-last", required_argument, NULL, 'k' },
		{ "keep-every", required_argument, NULL, 'K' },
		{ "snapshot", required_argument, NULL, 'S' },
		{ "zstd19", no_argument, NULL, 'z' },
		{ "threads", required_argument, NULL, 't' },
		{ "svg", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const usage_text *u = usage_of(argv[0]);
	int c;
	memset(o, 0, sizeof(*o));
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (c == 'h') {
			fputs(u->text, stdout);
			return CLI_OK;
		}
		if (c == '?' || !strchr(u->allowed, c)) {
			if (c != '?')
				cli_err("%s: option not accepted here: %s",
				        argv[0], argv[optind - 1]);
			goto usage;
		}
		switch (c) {
		case 's':
			o->store = optarg;
			break;
		case 'j':
			o->json = 1;
			break;
		case 'c':
			o->chain = 1;
			break;
		case 'S':
			o->snapshot = optarg;
			break;
		case 'z':
			o->zstd19 = 1;
			break;
		case 'g':
			if (!*optarg) {
				cli_err("%s: --svg: empty file name", argv[0]);
				goto usage;
			}
			o->svg = optarg;
			break;
		case 't':
			if (cli_parse_uint(optarg, 1024, &o->threads) < 0 ||
			    o->threads == 0) {
				cli_err("%s: bad thread count '%s'", argv[0],
				        optarg);
				goto usage;
			}
			break;
		case 'k':
		case 'K':
			if (cli_parse_uint(optarg, 1u << 30,
			                   c == 'k' ? &o->keep_last
			                            : &o->keep_every) < 0) {
				cli_err("%s: bad number '%s'", argv[0], optarg);
				goto usage;
			}
			o->have_keep_last |= c == 'k';
			break;
		}
	}
	return -1;
usage:
	fprintf(stderr, "%sTry 'ulpfs %s --help'.\n", u->text, argv[0]);
	return CLI_USAGE;
}

static int usage_err(const char *cmd, const char *why)
{
	if (why)
		cli_err("%s: %s", cmd, why);
	fprintf(stderr, "%s", usage_of(cmd)->text);
	return CLI_USAGE;
}

/* Split "PATH@N" (N > 0); *seq 0 when there is no @N. */
static int split_at(char *arg, uint64_t *seq)
{
	char *at = strrchr(arg, '@'), *end;
	*seq = 0;
	if (!at || !at[1] || at[1] < '0' || at[1] > '9')
		return 0;
	errno = 0;
	unsigned long long v = strtoull(at + 1, &end, 10);
	if (errno || *end || v == 0)
		return -1;
	*at = 0;
	*seq = v;
	return 0;
}

/* Run a request on the target found from --store or hint. */
static int run_req(cmd_opts *o, const char *hint, json_t *req, cli_target *t)
{
	int rc = cli_target_run(t, req, cli_local_sink());
	(void)o;
	(void)hint;
	json_decref(req);
	fflush(stdout);
	return rc;
}

/* A sink that keeps the output (a JSON answer) and shows the rest. */
typedef struct capture {
	char *buf;
	size_t n;
} capture;

static void cap_out(void *o, const char *buf, size_t len)
{
	capture *c = o;
	char *b = realloc(c->buf, c->n + len + 1);
	if (!b)
		return;
	memcpy(b + c->n, buf, len);
	c->n += len;
	b[c->n] = 0;
	c->buf = b;
}

static void cap_err(void *o, const char *msg)
{
	(void)o;
	cli_local_sink()->err(NULL, msg);
}

/* stats --svg: the figures come as JSON (with the checkpoints), make the
 * chart, then print what was asked for.  The text form is a second
 * request, cheap: the zstd -19 figures are kept in the catalog. */
static int stats_svg(cmd_opts *o, json_t *req, cli_target *t)
{
	capture cap = { 0 };
	cli_sink sink = { cap_out, cap_err, cli_local_sink()->progress, &cap,
		          NULL };
	json_object_set_new(req, "json", json_true());
	json_object_set_new(req, "checkpoints", json_true());
	int rc = cli_target_run(t, req, &sink);
	json_t *st = rc == CLI_OK ? json_loads(cap.buf ? cap.buf : "", 0, NULL)
	                          : NULL;
	size_t n = json_array_size(json_object_get(st, "by_checkpoint"));
	if (rc == CLI_OK && !json_is_object(st)) {
		cli_err("stats: malformed answer");
		rc = CLI_FAIL;
	}
	if (rc == CLI_OK && cli_stats_svg_write(o->svg, st) < 0)
		rc = CLI_FAIL;
	if (rc == CLI_OK && o->json) {
		fputs(cap.buf, stdout);
	} else if (rc == CLI_OK) {
		json_object_set_new(req, "json", json_false());
		json_object_del(req, "checkpoints");
		rc = cli_target_run(t, req, cli_local_sink());
	}
	if (rc == CLI_OK)
		fprintf(o->json ? stderr : stdout,
		        "chart: %s (%zu checkpoints)\n", o->svg, n);
	json_decref(st);
	json_decref(req);
	free(cap.buf);
	fflush(stdout);
	return rc;
}

/* Common shape: find the target, translate paths, run. */
int cmd_store(int argc, char **argv)
{
	const char *cmd = argv[0];
	cmd_opts o;
	cli_target t;
	json_t *req = NULL;
	int rc = parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	char **args = argv + optind;
	int nargs = argc - optind;

	if (strcmp(cmd, "snapshot") == 0) {
		if (nargs < 1)
			return usage_err(cmd, "missing subcommand");
		const char *sub = args[0];
		int create = strcmp(sub, "create") == 0;
		int list = strcmp(sub, "list") == 0;
		if (!create && !list && strcmp(sub, "show") &&
		    strcmp(sub, "delete"))
			return usage_err(cmd, "unknown subcommand");
		if (list ? nargs != 1 : create ? nargs < 2 : nargs != 2)
			return usage_err(cmd, "wrong number of arguments");
		rc = cli_target_find(&t, o.store,
		                     create && nargs > 2 ? args[2] : NULL);
		if (rc)
			return rc;
		req = json_pack("{s:s,s:s,s:b}", "op",
		                create                     ? "snap-create"
		                : list                     ? "snap-list"
		                : strcmp(sub, "show") == 0 ? "snap-show"
		                                           : "snap-delete",
		                "name", list ? "" : args[1], "json", o.json);
		json_t *ps = json_array();
		for (int i = 2; create && i < nargs; i++) {
			char *p = cli_target_path(&t, args[i]);
			if (!p) {
				json_decref(ps);
				json_decref(req);
				cli_target_free(&t);
				return CLI_USAGE;
			}
			json_array_append_new(ps, json_string(p));
			free(p);
		}
		json_object_set_new(req, "paths", ps);
		rc = run_req(&o, NULL, req, &t);
		cli_target_free(&t);
		return rc;
	}
	if (strcmp(cmd, "log") == 0) {
		uint64_t seq;
		if (nargs != 1)
			return usage_err(cmd, "give one PATH");
		if (split_at(args[0], &seq) < 0)
			return usage_err(cmd, "bad version number");
		if ((rc = cli_target_find(&t, o.store, args[0])))
			return rc;
		char *p = cli_target_path(&t, args[0]);
		if (!p) {
			cli_target_free(&t);
			return CLI_USAGE;
		}
		req = json_pack("{s:s,s:s,s:I,s:b,s:b}", "op", "log", "path", p,
		                "seq", (json_int_t)seq, "json", o.json, "chain",
		                o.chain);
		free(p);
		rc = run_req(&o, NULL, req, &t);
		cli_target_free(&t);
		return rc;
	}
	if (strcmp(cmd, "prune") == 0) {
		if (nargs < 1 || !o.have_keep_last)
			return usage_err(cmd, "give --keep-last N and PATH...");
		if ((rc = cli_target_find(&t, o.store, args[0])))
			return rc;
		json_t *ps = json_array();
		for (int i = 0; i < nargs; i++) {
			char *p = cli_target_path(&t, args[i]);
			if (!p) {
				json_decref(ps);
				cli_target_free(&t);
				return CLI_USAGE;
			}
			json_array_append_new(ps, json_string(p));
			free(p);
		}
		req = json_pack("{s:s,s:o,s:i,s:i}", "op", "prune", "paths", ps,
		                "keep_last", (int)o.keep_last, "keep_every",
		                (int)o.keep_every);
		rc = run_req(&o, NULL, req, &t);
		cli_target_free(&t);
		return rc;
	}
	if (strcmp(cmd, "restore") == 0) {
		if (!o.snapshot || nargs > 1)
			return usage_err(cmd, "give --snapshot NAME");
		if ((rc = cli_target_find(&t, o.store, nargs ? args[0] : NULL)))
			return rc;
		req = json_pack("{s:s,s:s}", "op", "restore", "snapshot",
		                o.snapshot);
		rc = run_req(&o, NULL, req, &t);
		cli_target_free(&t);
		return rc;
	}
	/* sync, stats, verify, gc: an optional path that names the mount. */
	if (nargs > 1)
		return usage_err(cmd, "too many arguments");
	if ((rc = cli_target_find(&t, o.store, nargs ? args[0] : NULL)))
		return rc;
	req = json_pack("{s:s,s:b}", "op", cmd, "json", o.json);
	if (strcmp(cmd, "stats") == 0) {
		json_object_set_new(req, "zstd19", json_boolean(o.zstd19));
		json_object_set_new(req, "threads",
		                    json_integer((json_int_t)o.threads));
	}
	rc = o.svg ? stats_svg(&o, req, &t) : run_req(&o, NULL, req, &t);
	cli_target_free(&t);
	return rc;
}

/* ------------------------------------------------------------ cat, export */

static void cap_progress(void *o, const char *w, uint64_t d, uint64_t t)
{
	(void)o;
	(void)w;
	(void)d;
	(void)t;
}

/* Copy one version to fd: through the mount's control directory when a
 * daemon holds the store (the kernel and the daemon's cache do the
 * work), else straight from the store opened here. */
static int copy_out(cli_target *t, const char *snap, json_t *it, int fd,
                    const char *dest, cli_progress *pg, uint64_t *done,
                    uint64_t total)
{
	const char *path = json_string_value(json_object_get(it, "path"));
	uint64_t id = (uint64_t)json_integer_value(json_object_get(it, "id"));
	uint64_t seq = (uint64_t)json_integer_value(json_object_get(it, "seq"));
	uint64_t size = (uint64_t)json_integer_value(json_object_get(it, "siz"
	                                                                 "e"));
	size_t cap = 8u << 20;
	char *buf = malloc(cap), *src = NULL;
	int in = -1, rc = 0;

	if (!buf)
		return -ENOMEM;
	if (!t->st) {
		if (!t->mnt) {
			free(buf);
			return -ENOTCONN;
		}
		if ((snap ? asprintf(&src, "%s/.ulpfs/snapshots/%s/%s", t->mnt,
		                     snap, path)
		          : asprintf(&src, "%s/.ulpfs/versions/%s/%" PRIu64,
		                     t->mnt, path, seq)) < 0) {
			free(buf);
			return -ENOMEM;
		}
		in = open(src, O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			rc = -errno;
			cli_err("%s: %s", src, strerror(errno));
			free(src);
			free(buf);
			return rc;
		}
		posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
	}
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < cap ? (size_t)(size - off) : cap;
		ssize_t got = t->st ? ulp_version_read(t->st, id, buf, n, off)
		                    : pread(in, buf, n, (off_t)off);
		if (got < 0 && !t->st)
			got = -errno;
		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		for (ssize_t w = 0; w < got;) {
			ssize_t k = write(fd, buf + w, (size_t)(got - w));
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				rc = -errno;
				cli_err("%s: %s", dest, strerror(errno));
				goto out;
			}
			w += k;
		}
		off += (uint64_t)got;
		*done += (uint64_t)got;
		if (pg)
			cli_progress_cb(pg, *done, total);
	}
	if (rc < 0)
		cli_err("%s: cannot read: %s", path, strerror(-rc));
out:
	if (in >= 0)
		close(in);
	free(src);
	free(buf);
	return rc;
}

/* Create the parent directories of a file path. */
static int mkparents(char *p)
{
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		int r = mkdir(p, 0755);
		*s = '/';
		if (r < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

int cmd_data(int argc, char **argv)
{
	const char *cmd = argv[0];
	int is_cat = strcmp(cmd, "cat") == 0;
	cmd_opts o;
	cli_target t;
	capture cap = { 0 };
	cli_sink sink = { cap_out, cap_err, cap_progress, &cap, NULL };
	int rc = parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	char **args = argv + optind;
	int nargs = argc - optind;
	uint64_t seq = 0;
	json_t *req;

	if (is_cat ? nargs != 1 : (o.snapshot ? nargs != 1 : nargs != 2))
		return usage_err(cmd, "wrong number of arguments");
	if (!o.snapshot && split_at(args[0], &seq) < 0)
		return usage_err(cmd, "bad version number");
	if ((rc = cli_target_find(&t, o.store, o.snapshot ? NULL : args[0])))
		return rc;
	if (o.snapshot) {
		req = json_pack("{s:s,s:s}", "op", "resolve", "snapshot",
		                o.snapshot);
	} else {
		char *p = cli_target_path(&t, args[0]);
		if (!p) {
			cli_target_free(&t);
			return CLI_USAGE;
		}
		req = json_pack("{s:s,s:s,s:I}", "op", "resolve", "path", p,
		                "seq", (json_int_t)seq);
		free(p);
	}
	rc = cli_target_run(&t, req, &sink);
	json_decref(req);
	json_t *items = rc == CLI_OK
	                        ? json_loads(cap.buf ? cap.buf : "", 0, NULL)
	                        : NULL;
	free(cap.buf);
	if (rc == CLI_OK && !json_is_array(items)) {
		cli_err("%s: malformed answer", cmd);
		rc = CLI_FAIL;
	}
	uint64_t total = 0, done = 0;
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it) total +=
		(uint64_t)json_integer_value(json_object_get(it, "size"));
	cli_progress pg;
	cli_progress_init(&pg, cmd);
	const char *dest = is_cat ? "stdout" : args[nargs - 1];
	struct stat sb;
	int dest_dir = !is_cat && stat(dest, &sb) == 0 && S_ISDIR(sb.st_mode);
	json_array_foreach(items, i, it)
	{
		if (rc != CLI_OK)
			break;
		const char *path = json_string_value(json_object_get(it, "pat"
		                                                         "h"));
		if (is_cat) {
			if (copy_out(&t, NULL, it, STDOUT_FILENO, dest, NULL,
			             &done, total) < 0)
				rc = CLI_FAIL;
			continue;
		}
		char *out = NULL;
		const char *base = strrchr(path, '/');
		base = base ? base + 1 : path;
		if (asprintf(&out, "%s%s%s", dest,
		             o.snapshot || dest_dir ? "/" : "",
		             o.snapshot ? path
		             : dest_dir ? base
		                        : "") < 0) {
			rc = CLI_FAIL;
			break;
		}
		int fd = -1;
		if (o.snapshot && mkparents(out) < 0)
			errno = errno ? errno : EIO;
		else
			fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			          0644);
		if (fd < 0) {
			cli_err("%s: %s", out, strerror(errno));
			rc = CLI_FAIL;
		} else {
			if (copy_out(&t, o.snapshot, it, fd, out, &pg, &done,
			             total) < 0)
				rc = CLI_FAIL;
			int64_t m =
				json_integer_value(json_object_get(it, "mtime_"
			                                               "ns"));
			struct timespec ts[2] = { { 0, UTIME_OMIT },
				                  { m / 1000000000,
				                    m % 1000000000 } };
			if (futimens(fd, ts) < 0 || close(fd) < 0) {
				cli_err("%s: %s", out, strerror(errno));
				rc = CLI_FAIL;
			}
		}
		free(out);
	}
	cli_progress_end(&pg);
	json_decref(items);
	cli_target_free(&t);
	return rc;
}
