/*
 * ctl.h - the admin service: the executor of the store commands and its
 * control channel (libulpctl.a, src/ctl/).
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
 *
 * This header is what src/cli uses; the operations share ctl_ops.h.
 */
#ifndef ULP_CTL_CTL_H
#define ULP_CTL_CTL_H

#include <jansson.h>
#include <stdint.h>

#include "fs/fs.h"
#include "store/store.h"

#define CLI_CTL_SOCK "control.sock"

/* What a request ends with, and the helper's exit codes. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

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

/* Run one request: CLI_OK, CLI_FAIL or CLI_USAGE. */
int cli_exec(cli_env *env, json_t *req);

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

/* Human-readable size ("1.5 GiB"). */
void cli_human(uint64_t n, char buf[32]);

/* Decode one UTF-8 character of s[0..n): its length, or 0 when it is not
 * valid UTF-8 (overlong, surrogate, beyond U+10FFFF, cut short). */
size_t cli_utf8_char(const unsigned char *s, size_t n, uint32_t *cp);

#endif /* ULP_CTL_CTL_H */
