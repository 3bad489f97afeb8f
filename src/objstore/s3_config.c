/*
 * s3_config.c - endpoint, region and credentials as the AWS tools find
 * them: the environment first, then the profile (AWS_PROFILE or
 * "default") of ~/.aws/credentials and ~/.aws/config.
 *
 * Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
 */
#include "objstore/s3_client.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Value of key in [section] of an INI file (AWS's format: "key = value";
 * nested "s3 =" blocks are indented "key = value" lines, read the same).
 * NULL when absent. */
static char *ini_get(const char *path, const char *section, const char *key)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char line[1024];
	int in = 0;
	char *val = NULL;
	while (!val && fgets(line, sizeof line, f)) {
		char *s = trim(line);
		if (*s == '#' || *s == ';' || !*s)
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');
			if (e)
				*e = '\0';
			in = !strcmp(trim(s + 1), section);
			continue;
		}
		char *eq = strchr(s, '=');
		if (!in || !eq)
			continue;
		*eq = '\0';
		if (!strcmp(trim(s), key)) {
			char *v = trim(eq + 1);
			if (*v)
				val = strdup(v);
		}
	}
	fclose(f);
	return val;
}

static char *home_file(const char *env, const char *rel)
{
	const char *p = getenv(env);
	if (p && *p)
		return strdup(p);
	const char *home = getenv("HOME");
	if (!home || !*home)
		return NULL;
	size_t n = strlen(home) + strlen(rel) + 2;
	char *out = malloc(n);
	if (out)
		snprintf(out, n, "%s/%s", home, rel);
	return out;
}

/* env, else credentials[profile], else config[profile section]. */
static char *lookup(const char *env, const char *cred, const char *conf,
                    const char *profile, const char *key)
{
	const char *v = env ? getenv(env) : NULL;
	if (v && *v)
		return strdup(v);
	char *r = NULL;
	if (cred)
		r = ini_get(cred, profile, key);
	if (!r && conf) {
		char sec[256];
		if (!strcmp(profile, "default"))
			snprintf(sec, sizeof sec, "default");
		else
			snprintf(sec, sizeof sec, "profile %s", profile);
		r = ini_get(conf, sec, key);
	}
	return r;
}

/* Loopback: where plain http is acceptable (tests, local gateways). */
static int is_loopback(const char *endpoint)
{
	const char *h = strstr(endpoint, "://");
	h = h ? h + 3 : endpoint;
	static const char *const lo[] = { "127.", "localhost", "[::1]" };
	for (size_t i = 0; i < sizeof lo / sizeof lo[0]; i++)
		if (!strncmp(h, lo[i], strlen(lo[i])))
			return 1;
	return 0;
}

int ulp_s3_config_load(ulp_s3_config *cfg, char *err, size_t errlen)
{
	memset(cfg, 0, sizeof *cfg);
	const char *profile = getenv("AWS_PROFILE");
	if (!profile || !*profile)
		profile = "default";
	char *cred = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/"
	                                                      "credentials");
	char *conf = home_file("AWS_CONFIG_FILE", ".aws/config");

	cfg->access_key = lookup("AWS_ACCESS_KEY_ID", cred, conf, profile,
	                         "aws_access_key_id");
	cfg->secret_key = lookup("AWS_SECRET_ACCESS_KEY", cred, conf, profile,
	                         "aws_secret_access_key");
	cfg->session_token = lookup("AWS_SESSION_TOKEN", cred, conf, profile,
	                            "aws_session_token");
	cfg->region = lookup("AWS_REGION", NULL, conf, profile, "region");
	if (!cfg->region)
		cfg->region = lookup("AWS_DEFAULT_REGION", NULL, NULL, profile,
		                     "region");
	if (!cfg->region)
		cfg->region = strdup("us-east-1");
	cfg->endpoint =
		lookup("AWS_ENDPOINT_URL", NULL, conf, profile, "endpoint_url");
	char *style = lookup("ULPFS_S3_ADDRESSING", NULL, conf, profile,
	                     "addressing_style");
	free(cred);
	free(conf);

	int rc = 0;
	if (!cfg->access_key || !cfg->secret_key) {
		set_err(err, errlen,
		        "no S3 credentials: set AWS_ACCESS_KEY_ID and "
		        "AWS_SECRET_ACCESS_KEY, or the [%s] profile of "
		        "~/.aws/credentials",
		        profile);
		rc = -EINVAL;
		goto out;
	}
	int aws = !cfg->endpoint;
	if (aws) {
		size_t n = strlen(cfg->region) + 40;
		cfg->endpoint = malloc(n);
		if (!cfg->endpoint) {
			rc = -ENOMEM;
			goto out;
		}
		snprintf(cfg->endpoint, n, "https://s3.%s.amazonaws.com",
		         cfg->region);
	}
	size_t el = strlen(cfg->endpoint);
	while (el && cfg->endpoint[el - 1] == '/')
		cfg->endpoint[--el] = '\0';
	if (strncmp(cfg->endpoint, "https://", 8) &&
	    strncmp(cfg->endpoint, "http://", 7)) {
		set_err(err, errlen,
		        "S3 endpoint %s: want http:// or https:// "
		        "(AWS_ENDPOINT_URL)",
		        cfg->endpoint);
		rc = -EINVAL;
		goto out;
	}
	if (!strncmp(cfg->endpoint, "http://", 7) &&
	    !is_loopback(cfg->endpoint)) {
		set_err(err, errlen,
		        "S3 endpoint %s: plain http is only for loopback; "
		        "use https",
		        cfg->endpoint);
		rc = -EINVAL;
		goto out;
	}
	if (style && !strcmp(style, "path"))
		cfg->path_style = 1;
	else if (style && !strcmp(style, "virtual"))
		cfg->path_style = 0;
	else if (style && strcmp(style, "auto")) {
		set_err(err, errlen,
		        "S3 addressing style '%s': want path, virtual or auto",
		        style);
		rc = -EINVAL;
		goto out;
	} else
		cfg->path_style = !aws;
	cfg->max_attempts = 6;
	cfg->part_size = 8u << 20;
	cfg->multipart_threshold = 16u << 20;
	cfg->parts_in_flight = 4;
out:
	free(style);
	if (rc)
		ulp_s3_config_free(cfg);
	return rc;
}

void ulp_s3_config_free(ulp_s3_config *cfg)
{
	free(cfg->endpoint);
	free(cfg->region);
	free(cfg->access_key);
	free(cfg->secret_key);
	free(cfg->session_token);
	memset(cfg, 0, sizeof *cfg);
}
