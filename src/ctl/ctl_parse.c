/*
 * ctl_parse.c - the control socket's request, from the bytes a
 * connection sent (see ctl_parse.h).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include "ctl_parse.h"

#include <string.h>

int cli_ctl_line_end(char *buf, size_t n)
{
	char *nl = memchr(buf, '\n', n);
	if (!nl)
		return 0;
	*nl = 0;
	return 1;
}

json_t *cli_ctl_request(const char *line)
{
	json_t *req = json_loads(line, 0, NULL);
	if (req && !json_is_object(req)) {
		json_decref(req);
		req = NULL;
	}
	return req;
}
