/*
 * bench_util.h - what the C benchmarks share: CPU clocks and medians.
 */
#ifndef ULP_BENCH_UTIL_H
#define ULP_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on clock (CLOCK_THREAD_CPUTIME_ID, CLOCK_PROCESS_CPUTIME_ID):
 * CPU time, which other processes on a shared machine disturb less than
 * the wall clock. */
static inline double bench_cpu_now(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorted in place; 0 when n is 0). */
static inline double bench_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(double), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "--reps R" at argv[*a] (then *a moves past it): R, else dflt. */
static inline unsigned bench_reps_arg(int argc, char **argv, int *a,
                                      unsigned dflt)
{
	if (*a + 1 < argc && strcmp(argv[*a], "--reps") == 0) {
		*a += 2;
		return (unsigned)atoi(argv[*a - 1]);
	}
	return dflt;
}

#endif
