/*
 * stats_svg.h - the per-checkpoint figures of `ulpfs stats` and the chart
 * of `ulpfs stats --svg FILE`.
 *
 * A checkpoint is the k-th version of the files of one directory: every
 * file of a Hugging Face checkpoint-N/ directory has one version, so each
 * directory is one checkpoint; a directory whose files are overwritten in
 * place (latest.pt) gives one checkpoint per round of versions.
 */
#ifndef ULP_CLI_STATS_SVG_H
#define ULP_CLI_STATS_SVG_H

#include <jansson.h>
#include <stdint.h>

#include "ctl/ctl.h"

/* The checkpoints of the versions of vec whose counted[i] is set, in the
 * order they were written (oldest mtime first; ties by name): a JSON
 * array of {"name", "versions", "logical", "stored"} and, when z19 is not
 * NULL, "zstd19" (z19[i]: the zstd -19 bytes of version i).  NULL when out
 * of memory. */
json_t *cli_stats_checkpoints(const cli_vvec *vec, const char *counted,
                              const uint64_t *z19);

/* Write the chart of stats (the JSON of a stats request made with
 * "checkpoints": its "by_checkpoint" array) to path as SVG: grouped bars
 * of raw, stored and, when the figures are there, zstd -19 bytes per
 * checkpoint.  The file is replaced whole or not at all.  0, or -1 after
 * printing why. */
int cli_stats_svg_write(const char *path, json_t *stats);

#endif /* ULP_CLI_STATS_SVG_H */
