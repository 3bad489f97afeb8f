/*
 * cli.h - shared pieces of the ulpfs command-line helper.
 */
#ifndef ULP_CLI_H
#define ULP_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "ctl/ctl.h"
#include "ulpfs/ulp.h"

/* A read-only view of a whole file (mmapped; size 0 gives data NULL). */
typedef struct cli_map {
	const char *path;
	const uint8_t *data;
	uint64_t size;
} cli_map;

/* Map path; on failure prints "ulpfs: PATH: reason" and returns -1. */
int cli_map_open(cli_map *m, const char *path);
void cli_map_close(cli_map *m);

/* ulp_ref_read_fn over a cli_map. */
int cli_map_read(void *opaque, uint64_t off, void *buf, size_t len);
/* ulp_ref_map_fn over a cli_map. */
const void *cli_map_map(void *opaque, uint64_t off, size_t len);

/* An object file opened for random reads (pread on a descriptor). */
typedef struct cli_objfile {
	int fd;
	uint64_t size;
	ulp_object *obj;
} cli_objfile;

/* ulp_read_at_fn over a file descriptor (opaque points to the int fd). */
int cli_fd_read_at(void *opaque, uint64_t off, void *buf, size_t len);
/* ulp_write_fn over a file descriptor (opaque points to the int fd). */
int cli_fd_write(void *opaque, const void *buf, size_t len);

/* The CLI process's thread pool (ulp_pool): one thread per online CPU,
 * or min_threads if more, decided by the first call; NULL when it cannot
 * be had.  It is never freed (its threads end with the process). */
ulp_pool *cli_pool(unsigned min_threads);
/* A decoding context for the CLI's reads (unpack, bench): without the
 * stored payloads' checksum, since each chunk's decoded-bytes checksum
 * still rejects a corrupt payload; NULL when out of memory. */
ulp_dctx *cli_dctx_new(void);
/* Decode every chunk of obj with nthreads workers on cli_pool(), into
 * dst (the whole logical size) when dst is not NULL, else streamed in
 * order to the descriptor out_fd.  ref may be NULL for a standalone object.  dctx, if
 * not NULL, holds nthreads contexts to reuse. */
int cli_decode_all(const ulp_object *obj, const cli_map *ref, unsigned nthreads,
                   ulp_dctx *const *dctx, uint8_t *dst, int out_fd);
/* The same for an object that may name a side file (side: its bytes, or
 * NULL; a chunk that needs a side then fails with ULP_ERR_SIDE). */
int cli_decode_all_side(const ulp_object *obj, const cli_map *ref,
                        const cli_map *side, unsigned nthreads,
                        ulp_dctx *const *dctx, uint8_t *dst, int out_fd);

/* Check that ref is the reference obj was coded against (size and
 * XXH3-128); prints the reason and returns -1 when it is not. */
int cli_check_ref(const ulp_object *obj, const cli_map *ref,
                  const char *obj_path);

/* Progress line on stderr, only when stderr is a terminal. */
typedef struct cli_progress {
	const char *what;
	int tty;
	double last;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *what);
void cli_progress_cb(void *opaque, uint64_t done, uint64_t total);
void cli_progress_end(cli_progress *p);

/* Parse a size such as 4096, 64K, 2M, 1G; -1 on error. */
int cli_parse_size(const char *s, uint64_t *out);
/* Parse --chunk-size for command cmd (between ULP_CHUNK_SIZE_MIN and
 * ULP_CHUNK_SIZE_MAX); prints the error and returns -1 when it is bad. */
int cli_parse_chunk_size(const char *cmd, const char *s, uint32_t *out);
/* Parse a non-negative integer no larger than max; -1 on error. */
int cli_parse_uint(const char *s, unsigned max, unsigned *out);

double cli_now(void);

/* The sink of this process (cli_sink.c): stdout, stderr, progress on a
 * terminal. */
const cli_sink *cli_local_sink(void);

void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* What to say of an error (-errno) opening or reaching store: for
 * -EACCES / -EPERM, that a store is private to its daemon's user, named
 * (written into buf, n bytes); else strerror. */
const char *cli_store_error(const char *store, int err, char *buf, size_t n);

/* A line of /proc/self/mountinfo (cli_mountinfo.c). */
typedef struct cli_mount_ent {
	char *target, *fstype, *source;
	char dev[32]; /* "MAJOR:MINOR" of its superblock */
} cli_mount_ent;
void cli_mount_ent_free(cli_mount_ent *e);
/* The topmost mount on path (by_source: the ulpfs mount whose source is
 * path).  1 found, 0 not, -1 error. */
int cli_find_mount(const char *path, int by_source, cli_mount_ent *out);
/* The innermost ulpfs mount that the absolute path lies in: 1, 0, -1. */
int cli_find_mount_of(const char *path, cli_mount_ent *out);
/* Processes in other mount namespaces than ours that still hold a mount
 * of the superblock dev ("MAJOR:MINOR"): one PID per namespace, up to max
 * in pids.  Their number of namespaces (which may exceed max), or -1. */
int cli_mount_holders(const char *dev, long *pids, int max);

int cmd_pack(int argc, char **argv);
int cmd_unpack(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
/* log, snapshot, sync, stats, verify, gc, prune, restore (cmd_admin.c) */
int cmd_store(int argc, char **argv);
/* cat, export (cmd_admin.c) */
int cmd_data(int argc, char **argv);

#endif /* ULP_CLI_H */
