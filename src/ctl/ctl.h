/*
 * ctl.h - the helper's executor and its control channel.
 *
 * Every store command of the helper is a JSON request ({"op": "log",
 * ...}) run by cli_exec() against an open store.  When a daemon has the
 * store mounted it holds the store's lock, so the helper sends the request
 * over STORE/control.sock and the daemon runs the same cli_exec(); when
 * none does, the helper opens the store and runs it itself.  Output goes
 * through a sink: stdout text, messages, progress.
 *
 * Wire format: the client sends one line of JSON; the server answers with
 * lines of JSON: {"o": text} (stdout), {"e": message} (stderr), {"p":
 * [done, total], "w": what} (progress), and last {"rc": exit code}.
 */
#ifndef ULP_CLI_CTL_H
#define ULP_CLI_CTL_H

#include <jansson.h>
#include <stdint.h>

#include "fs/fs.h"
#include "store/store.h"

#define CLI_CTL_SOCK "control.sock"

typedef struct cli_sink {
	void (*out)(void *opaque, const char *buf, size_t len);
	void (*err)(void *opaque, const char *msg); /* without newline */
	void (*progress)(void *opaque, const char *what, uint64_t done,
	                 uint64_t total);
	void *opaque;
	/* Non-zero once the output has nowhere to go (the client hung up,
	 * or the daemon is stopping), so that a long operation can stop
	 * early; NULL: never. */
	int (*cancelled)(void *opaque);
} cli_sink;

typedef struct cli_env {
	ulp_store *st;
	ulp_fs *fs; /* the mount this process serves, or NULL */
	const cli_sink *sink;
	const char *dir; /* the store's directory, or NULL */
	/* st's bucket when st is a bucket store's (verify also checks the
	 * objects only the bucket holds), or NULL */
	struct ulp_bucket *bucket;
} cli_env;

/* A growing list of versions with their paths (ulp_version_fn
 * callbacks fill it). */
typedef struct cli_vvec {
	ulp_version_info *v;
	char **path;
	size_t n, cap;
} cli_vvec;

/* ulp_version_fn: append (v, path) to the cli_vvec at opaque. */
int cli_vvec_add(void *opaque, const ulp_version_info *v, const char *path);
void cli_vvec_free(cli_vvec *a);

/* ctl_baseline.c: the size `zstd -19 FILE` gives each version in vec,
 * computed on nthreads threads (figures kept in the catalog are reused,
 * new ones are kept): z[i] the size, gone[i] set for a version deleted
 * meanwhile (not to be counted), *cached the figures found kept.  0, or
 * -errno after naming each version that failed, or when the client went
 * away (env->sink->cancelled). */
int cli_z19_sizes(cli_env *env, const cli_vvec *vec, unsigned nthreads,
                  uint64_t *z, char *gone, uint64_t *cached);

/* Run one request: CLI_OK, CLI_FAIL or CLI_USAGE. */
int cli_exec(cli_env *env, json_t *req);

/* Commit every file closed so far: on a mount, first wait (briefly) for
 * the kernel's releases of descriptors already closed, which arrive
 * after close(2) returns.  0 or -errno. */
int cli_env_sync(const cli_env *env);

void cli_outf(cli_env *env, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void cli_errf(cli_env *env, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The sink of this process: stdout, stderr, progress on a terminal. */
const cli_sink *cli_local_sink(void);

/* The daemon side: one thread accepting on STORE/control.sock (0600), a
 * thread per connection. */
typedef struct cli_server cli_server;
int cli_server_start(ulp_store *st, ulp_fs *fs, const char *store_dir,
                     struct ulp_bucket *bucket, cli_server **out);
void cli_server_stop(cli_server *s);

/* Send req to the daemon of store_dir: 0 with *rc set, -ECONNREFUSED or
 * -ENOENT when no daemon listens, other -errno on failure. */
int cli_remote(const char *store_dir, json_t *req, const cli_sink *sink,
               int *rc);

/* The executor's parts (ctl_exec.c, ctl_ops.c). */
int cli_op_log(cli_env *env, json_t *req);
int cli_op_snapshot(cli_env *env, const char *op, json_t *req);
int cli_op_resolve(cli_env *env, json_t *req);
int cli_op_restore(cli_env *env, json_t *req);
int cli_op_stats(cli_env *env, json_t *req);
int cli_op_verify(cli_env *env, json_t *req);
int cli_op_prune(cli_env *env, json_t *req);
/* Human-readable size ("1.5 GiB"). */
void cli_human(uint64_t n, char buf[32]);
void cli_time(int64_t ns, char buf[32]);

#endif /* ULP_CLI_CTL_H */
