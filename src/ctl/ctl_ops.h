/*
 * ctl_ops.h - the executor's operations and what they share, inside
 * src/ctl: cli_exec() (ctl_exec.c) dispatches to the operations, which
 * write through ctl_out.c.  Nothing here calls cli_exec().
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_CTL_OPS_H
#define ULP_CTL_OPS_H

#include <jansson.h>
#include <stdint.h>

#include "ctl.h"

/* ------------------------------------------------------------ ctl_out.c */

void cli_outf(cli_env *env, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void cli_errf(cli_env *env, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Local time of ns since the epoch ("2026-01-31 12:00:00"). */
void cli_time(int64_t ns, char buf[32]);

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

/* Every version that still has bytes, and their total logical size. */
typedef struct cli_vall {
	cli_vvec vec;
	uint64_t bytes;
} cli_vall;

/* ulp_version_fn: append (v, path) to the cli_vall at opaque unless v is
 * deleted. */
int cli_vall_add(void *opaque, const ulp_version_info *v, const char *path);

/* Commit every file closed so far: on a mount, first wait (briefly) for
 * the kernel's releases of descriptors already closed, which arrive
 * after close(2) returns.  0 or -errno. */
int cli_env_sync(const cli_env *env);

/* ------------------------------------------------------------ the rest */

/* ctl_baseline.c: the size `zstd -19 FILE` gives each version in vec,
 * computed on nthreads threads (figures kept in the catalog are reused,
 * new ones are kept): z[i] the size, gone[i] set for a version deleted
 * meanwhile (not to be counted), *cached the figures found kept.  0, or
 * -errno after naming each version that failed, or when the client went
 * away (env->sink->cancelled). */
int cli_z19_sizes(cli_env *env, const cli_vvec *vec, unsigned nthreads,
                  uint64_t *z, char *gone, uint64_t *cached);

/* ctl_ckpt.c: the checkpoints of the versions of vec whose counted[i] is
 * set, in the order they were written (oldest mtime first; ties by name):
 * a JSON array of {"name", "versions", "logical", "stored"} and, when z19
 * is not NULL, "zstd19" (z19[i]: the zstd -19 bytes of version i).  A
 * checkpoint is the k-th version of the files of one directory: every
 * file of a Hugging Face checkpoint-N/ directory has one version, so each
 * directory is one checkpoint; a directory whose files are overwritten in
 * place (latest.pt) gives one checkpoint per round of versions.  NULL
 * when out of memory. */
json_t *cli_stats_checkpoints(const cli_vvec *vec, const char *counted,
                              const uint64_t *z19);

/* The operations: CLI_OK, CLI_FAIL or CLI_USAGE (ctl_exec.c: log,
 * snapshots, resolve, prune; ctl_restore.c, ctl_stats.c, ctl_verify.c). */
int cli_op_log(cli_env *env, json_t *req);
int cli_op_snapshot(cli_env *env, const char *op, json_t *req);
int cli_op_resolve(cli_env *env, json_t *req);
int cli_op_prune(cli_env *env, json_t *req);
int cli_op_restore(cli_env *env, json_t *req);
int cli_op_stats(cli_env *env, json_t *req);
int cli_op_verify(cli_env *env, json_t *req);

#endif /* ULP_CTL_OPS_H */
