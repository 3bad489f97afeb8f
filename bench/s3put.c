/*
 * s3put.c - upload files with ulpfs's own S3 client, for bench/s3_bench.sh
 * (upload throughput of the client against awscli on the same files).
 *
 *   s3put [-j N] s3://BUCKET/PREFIX FILE...
 *
 * Each FILE goes to PREFIX/basename(FILE), N files in flight (default 4),
 * multipart above the client's threshold as the mount does.  Credentials
 * and endpoint as for "ulpfs mount" (AWS_* and ~/.aws).
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objstore/bucket.h"
#include "objstore/s3_client.h"

static ulp_s3 *s3;
static const char *prefix;
static char **files;
static int nfiles;
static atomic_int next_file, failures;

static void *worker(void *arg)
{
	(void)arg;
	for (int i; (i = atomic_fetch_add(&next_file, 1)) < nfiles;) {
		int fd = open(files[i], O_RDONLY);
		struct stat sb;
		if (fd < 0 || fstat(fd, &sb) < 0) {
			perror(files[i]);
			atomic_fetch_add(&failures, 1);
			if (fd >= 0)
				close(fd);
			continue;
		}
		char *copy = strdup(files[i]), key[2048];
		snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "/" : "",
		         basename(copy));
		free(copy);
		ulp_s3_status st;
		if (ulp_s3_put_fd(s3, key, fd, (uint64_t)sb.st_size, &st)) {
			char line[400];
			fprintf(stderr, "s3put: %s: %s\n", key,
			        ulp_s3_strstatus(&st, line, sizeof line));
			atomic_fetch_add(&failures, 1);
		}
		close(fd);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int jobs = 4, c;
	while ((c = getopt(argc, argv, "j:")) != -1) {
		if (c != 'j' || (jobs = atoi(optarg)) < 1 || jobs > 64) {
			fprintf(stderr, "usage: s3put [-j N] "
			                "s3://BUCKET/PREFIX FILE...\n");
			return 2;
		}
	}
	if (argc - optind < 2) {
		fprintf(stderr, "usage: s3put [-j N] s3://BUCKET/PREFIX "
		                "FILE...\n");
		return 2;
	}
	char err[512], *bucket, *pfx;
	if (ulp_bucket_parse_url(argv[optind], &bucket, &pfx, err,
	                         sizeof err)) {
		fprintf(stderr, "s3put: %s\n", err);
		return 2;
	}
	ulp_s3_config cfg;
	if (ulp_s3_config_load(&cfg, err, sizeof err) ||
	    !(s3 = ulp_s3_open(&cfg, bucket, err, sizeof err))) {
		fprintf(stderr, "s3put: %s\n", err);
		return 1;
	}
	prefix = pfx;
	files = argv + optind + 1;
	nfiles = argc - optind - 1;
	pthread_t th[64];
	for (int i = 0; i < jobs; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < jobs; i++)
		pthread_join(th[i], NULL);
	ulp_s3_close(s3);
	ulp_s3_config_free(&cfg);
	free(bucket);
	free(pfx);
	return atomic_load(&failures) ? 1 : 0;
}
