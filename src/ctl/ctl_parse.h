/*
 * ctl_parse.h - the control socket's request, from the bytes a
 * connection sent: no socket, no store (ctl_server.c reads the bytes and
 * runs the request; tests/fuzz/fuzz_ctl.c feeds it any bytes).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_CLI_CTL_PARSE_H
#define ULP_CLI_CTL_PARSE_H

#include <jansson.h>
#include <stddef.h>

/* Requests are one line of at most this many bytes. */
#define CLI_CTL_MAX_LINE (1u << 20)

/* Whether buf[0..n) holds the whole request line: then the line is
 * NUL-terminated in place, at its first newline, and 1 returned. */
int cli_ctl_line_end(char *buf, size_t n);

/* The request of a line: its JSON object, or NULL when the line is not
 * one (the caller answers "malformed request"). */
json_t *cli_ctl_request(const char *line);

#endif /* ULP_CLI_CTL_PARSE_H */
