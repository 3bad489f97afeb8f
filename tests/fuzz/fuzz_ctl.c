/*
 * fuzz_ctl.c - libFuzzer target: the control socket's request parser
 * (src/ctl/ctl_parse.c) on any bytes a connection may send, as
 * ctl_server.c's read_line hands them over: in pieces of the sizes the
 * input's first byte picks, each piece appended and the line looked
 * for, then the request parsed.  A request is a JSON object; its "op"
 * is read as cli_exec reads it.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_parse.h"
#include "fuzz_cpu.h"

static volatile size_t sink;

static void fuzz_one(const uint8_t *data, size_t size)
{
	if (size < 1 || size > CLI_CTL_MAX_LINE)
		return;
	size_t piece = (size_t)data[0] + 1, n = 0;
	data++;
	size--;
	char *buf = malloc(size + 1);
	if (!buf)
		abort();
	int whole = 0;
	while (n < size && !whole) {
		size_t k = size - n < piece ? size - n : piece;
		memcpy(buf + n, data + n, k);
		n += k;
		whole = cli_ctl_line_end(buf, n);
	}
	if (whole) {
		if (strlen(buf) >= n)
			abort(); /* the line must end inside the bytes */
		json_t *req = cli_ctl_request(buf);
		if (req) {
			if (!json_is_object(req))
				abort();
			const char *op =
				json_string_value(json_object_get(req, "op"));
			sink += op ? strlen(op) : 0;
			json_decref(req);
		}
	}
	free(buf);
}
