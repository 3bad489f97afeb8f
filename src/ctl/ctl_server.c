/*
 * ctl_server.c - the control channel: the daemon's unix socket server and
 * the helper's client (see ctl.h for the wire format).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_parse.h"

struct cli_server {
	ulp_store *st;
	ulp_fs *fs;
	struct ulp_bucket *bucket; /* the cli_env's */
	char *dir;                 /* the store's */
	char *path;
	int lfd;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned active; /* connection threads running */
	int stopping;
};

typedef struct conn {
	cli_server *srv;
	int fd;
	int broken; /* the client went away: stop writing */
} conn;

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void send_frame(conn *c, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (s && !c->broken) {
		size_t n = strlen(s);
		s[n] = '\n'; /* replaces the NUL: send n + 1 bytes */
		if (send_all(c->fd, s, n + 1) < 0)
			c->broken = 1;
	}
	free(s);
	json_decref(j);
}

static void r_out(void *o, const char *buf, size_t len)
{
	send_frame(o, json_pack("{s:s%}", "o", buf, len));
}

static void r_err(void *o, const char *msg)
{
	send_frame(o, json_pack("{s:s}", "e", msg));
}

static void r_progress(void *o, const char *what, uint64_t done, uint64_t total)
{
	send_frame(o, json_pack("{s:[I,I],s:s}", "p", (json_int_t)done,
	                        (json_int_t)total, "w", what));
}

/* The client is gone (Ctrl-C, killed) or the daemon is unmounting: a long
 * operation need not go on, and must not hold up cli_server_stop(). */
static int r_cancelled(void *o)
{
	conn *c = o;
	struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };

	pthread_mutex_lock(&c->srv->mu);
	int stopping = c->srv->stopping;
	pthread_mutex_unlock(&c->srv->mu);
	if (stopping || c->broken)
		return 1;
	/* The client sends nothing after its request, so any hang-up or
	 * error on the socket means it went away. */
	return poll(&p, 1, 0) > 0 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* Read one line (the request), at most CLI_CTL_MAX_LINE bytes. */
static char *read_line(int fd)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		if (n + 1 == cap) {
			if (cap >= CLI_CTL_MAX_LINE)
				break;
			char *b = realloc(buf, cap * 2);
			if (!b)
				break;
			buf = b;
			cap *= 2;
		}
		ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (cli_ctl_line_end(buf, n))
			return buf;
	}
	free(buf);
	return NULL;
}

static void *conn_main(void *arg)
{
	conn *c = arg;
	cli_server *srv = c->srv;
	char *line = read_line(c->fd);
	json_t *req = line ? cli_ctl_request(line) : NULL;
	cli_sink sink = { r_out, r_err, r_progress, c, r_cancelled };
	int rc = CLI_USAGE;

	if (req) {
		cli_env env = { srv->st, srv->fs, &sink, srv->dir,
			        srv->bucket };
		rc = cli_exec(&env, req);
	} else {
		r_err(c, "control.sock: malformed request");
	}
	send_frame(c, json_pack("{s:i}", "rc", rc));
	json_decref(req);
	free(line);
	close(c->fd);
	free(c);
	pthread_mutex_lock(&srv->mu);
	srv->active--;
	pthread_cond_broadcast(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
	return NULL;
}

static void *accept_main(void *arg)
{
	cli_server *srv = arg;
	for (;;) {
		int fd = accept4(srv->lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_mutex_lock(&srv->mu);
		int stop = srv->stopping;
		pthread_mutex_unlock(&srv->mu);
		if (stop) {
			if (fd >= 0)
				close(fd);
			break;
		}
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE)
				continue;
			break;
		}
		/* A silent client must not hold a thread for ever. */
		struct timeval tv = { 30, 0 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		conn *c = calloc(1, sizeof(*c));
		pthread_t t;
		pthread_attr_t a;
		if (!c) {
			close(fd);
			continue;
		}
		c->srv = srv;
		c->fd = fd;
		pthread_mutex_lock(&srv->mu);
		srv->active++;
		pthread_mutex_unlock(&srv->mu);
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, conn_main, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&srv->mu);
			srv->active--;
			pthread_mutex_unlock(&srv->mu);
		}
		pthread_attr_destroy(&a);
	}
	return NULL;
}

static int sock_addr(const char *dir, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path, sizeof(a->sun_path), "%s/%s", dir,
	                 CLI_CTL_SOCK);
	return n < 0 || (size_t)n >= sizeof(a->sun_path) ? -ENAMETOOLONG : 0;
}

int cli_server_start(ulp_store *st, ulp_fs *fs, const char *store_dir,
                     struct ulp_bucket *bucket, cli_server **out)
{
	struct sockaddr_un a;
	cli_server *srv = calloc(1, sizeof(*srv));
	int rc;

	*out = NULL;
	if (!srv)
		return -ENOMEM;
	srv->st = st;
	srv->fs = fs;
	srv->bucket = bucket;
	rc = sock_addr(store_dir, &a);
	if (rc < 0)
		goto fail;
	srv->path = strdup(a.sun_path);
	srv->dir = strdup(store_dir);
	srv->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!srv->path || !srv->dir || srv->lfd < 0) {
		rc = srv->path && srv->dir ? -errno : -ENOMEM;
		goto fail;
	}
	unlink(a.sun_path); /* stale: we hold the store's lock */
	mode_t old = umask(0077);
	rc = bind(srv->lfd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (rc < 0 || chmod(a.sun_path, 0600) < 0 || listen(srv->lfd, 64) < 0) {
		rc = -errno;
		goto fail;
	}
	pthread_mutex_init(&srv->mu, NULL);
	pthread_cond_init(&srv->cv, NULL);
	if ((rc = pthread_create(&srv->thread, NULL, accept_main, srv)) != 0) {
		rc = -rc;
		pthread_mutex_destroy(&srv->mu);
		pthread_cond_destroy(&srv->cv);
		unlink(a.sun_path);
		goto fail;
	}
	*out = srv;
	return 0;
fail:
	if (srv->lfd > 0)
		close(srv->lfd);
	free(srv->path);
	free(srv->dir);
	free(srv);
	return rc;
}

void cli_server_stop(cli_server *srv)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->mu);
	srv->stopping = 1;
	pthread_mutex_unlock(&srv->mu);
	unlink(srv->path);
	/* Wake accept(): shutdown() on a listening socket does that. */
	shutdown(srv->lfd, SHUT_RDWR);
	pthread_join(srv->thread, NULL);
	close(srv->lfd);
	pthread_mutex_lock(&srv->mu);
	while (srv->active)
		pthread_cond_wait(&srv->cv, &srv->mu);
	pthread_mutex_unlock(&srv->mu);
	pthread_mutex_destroy(&srv->mu);
	pthread_cond_destroy(&srv->cv);
	free(srv->path);
	free(srv->dir);
	free(srv);
}

/* ------------------------------------------------------------ client */

int cli_remote(const char *store_dir, json_t *req, const cli_sink *sink,
               int *rc)
{
	struct sockaddr_un a;
	int fd, r = sock_addr(store_dir, &a);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	char *s = json_dumps(req, JSON_COMPACT);
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	size_t n = strlen(s);
	s[n] = '\n';
	r = send_all(fd, s, n + 1) < 0 ? -EPIPE : 0;
	free(s);
	FILE *f = r == 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		close(fd);
		return r ? r : -ENOMEM;
	}
	char *line = NULL;
	size_t cap = 0;
	int got = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *j = json_loads(line, 0, NULL), *v;
		if (!j)
			continue;
		if ((v = json_object_get(j, "o")) && json_is_string(v))
			sink->out(sink->opaque, json_string_value(v),
			          json_string_length(v));
		else if ((v = json_object_get(j, "e")) && json_is_string(v))
			sink->err(sink->opaque, json_string_value(v));
		else if ((v = json_object_get(j, "p")) && json_is_array(v))
			sink->progress(
				sink->opaque,
				json_string_value(json_object_get(j, "w"))
					?: "",
				(uint64_t)json_integer_value(
					json_array_get(v, 0)),
				(uint64_t)json_integer_value(
					json_array_get(v, 1)));
		else if ((v = json_object_get(j, "rc"))) {
			*rc = (int)json_integer_value(v);
			got = 1;
		}
		json_decref(j);
	}
	free(line);
	fclose(f);
	if (!got)
		return -ECONNRESET; /* the daemon went away mid-request */
	return 0;
}
