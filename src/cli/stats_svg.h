/*
 * stats_svg.h - the chart of `ulpfs stats --svg FILE`.
 */
#ifndef ULP_CLI_STATS_SVG_H
#define ULP_CLI_STATS_SVG_H

#include <jansson.h>

/* Write the chart of stats (the JSON of a stats request made with
 * "checkpoints": its "by_checkpoint" array) to path as SVG: grouped bars
 * of raw, stored and, when the figures are there, zstd -19 bytes per
 * checkpoint.  The file is replaced whole or not at all.  0, or -1 after
 * printing why. */
int cli_stats_svg_write(const char *path, json_t *stats);

#endif /* ULP_CLI_STATS_SVG_H */
