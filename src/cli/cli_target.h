/*
 * cli_target.h - the store a helper command acts on (cli_target.c).
 */
#ifndef ULP_CLI_TARGET_H
#define ULP_CLI_TARGET_H

#include "ctl/ctl.h"

typedef struct cli_target {
	char *store;         /* absolute path of the store */
	char *mnt;           /* its mount point, NULL when not mounted */
	int explicit_store;  /* given with --store */
	ulp_store *st;       /* opened here (no daemon), or NULL */
	struct mount_s3 *s3; /* its bucket, when st is a bucket store's */
	char *url; /* --store s3://...: store is its cache directory */
} cli_target;

/* From --store (may be NULL) or the mount that hint (a path argument, or
 * NULL for the working directory) lies in.  CLI_OK, or an exit code after
 * printing why. */
int cli_target_find(cli_target *t, const char *store, const char *hint);
/* A command-line path as a path in the store ("a/b"; "" for the root),
 * malloc()ed; NULL after printing why. */
char *cli_target_path(cli_target *t, const char *arg);
/* Run a request: by the daemon when one answers, else here.  Exit code. */
int cli_target_run(cli_target *t, json_t *req, const cli_sink *sink);
void cli_target_free(cli_target *t);

#endif /* ULP_CLI_TARGET_H */
