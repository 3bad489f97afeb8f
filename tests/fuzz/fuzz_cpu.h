/*
 * fuzz_cpu.h - every target's entry point, with the limit on one input:
 * a second of CPU time (user and system, ITIMER_PROF), after which the
 * input is reported and the process aborts (libFuzzer keeps the input as
 * a crash).  A decoder must never hang, and CPU time, unlike libFuzzer's
 * wall-clock -timeout, does not grow when the machine is busy.
 *
 * A target includes it once and defines fuzz_one(data, size).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#ifndef ULP_FUZZ_CPU_H
#define ULP_FUZZ_CPU_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_one(const uint8_t *data, size_t size);

static void fuzz_cpu_over(int sig)
{
	static const char msg[] = "\n==fuzz== this input took more than 1 s of "
				  "CPU time: "
				  "a decoder or parser must never run that "
				  "long\n";
	(void)sig;
	ssize_t w = write(2, msg, sizeof msg - 1);
	(void)w;
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int armed;
	if (!armed) {
		struct sigaction sa = { .sa_handler = fuzz_cpu_over };
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGPROF, &sa, NULL))
			abort();
		armed = 1;
	}
	struct itimerval on = { { 0, 0 }, { 1, 0 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_PROF, &on, NULL);
	fuzz_one(data, size);
	setitimer(ITIMER_PROF, &off, NULL);
	return 0;
}

#endif
