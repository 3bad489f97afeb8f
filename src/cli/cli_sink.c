/*
 * cli_sink.c - the sink of a request the helper runs itself: stdout,
 * stderr, and a progress line when stderr is a terminal.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static void l_out(void *o, const char *buf, size_t len)
{
	(void)o;
	fwrite(buf, 1, len, stdout);
}

static void l_err(void *o, const char *msg)
{
	(void)o;
	fflush(stdout);
	fprintf(stderr, "ulpfs: %s\n", msg);
}

static void l_progress(void *o, const char *what, uint64_t done, uint64_t total)
{
	static __thread cli_progress p; /* one command per process */
	(void)o;
	if (!isatty(STDERR_FILENO))
		return;
	if (!p.what || strcmp(p.what, what) != 0)
		cli_progress_init(&p, what);
	p.what = what;
	cli_progress_cb(&p, done, total);
	if (done >= total)
		cli_progress_end(&p);
}

const cli_sink *cli_local_sink(void)
{
	/* Ctrl-C ends this process: nothing to poll. */
	static const cli_sink s = { l_out, l_err, l_progress, NULL, NULL };
	return &s;
}
