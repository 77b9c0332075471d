#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef MEMRA_SAN
#include <sanitizer/asan_interface.h>
#endif

const char *prog = "memra";

int
util_err(char *buf, const char *fmt, ...)
{
	va_list ap;

	if (buf == NULL)
		return -1;
	va_start(ap, fmt);
	vsnprintf(buf, UTIL_ERRLEN, fmt, ap);
	va_end(ap);
	return -1;
}

int
util_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0' || *s == ' ' || *s == '\t') {
		errno = EINVAL;
		return -1;
	}
	errno = 0;
	v = strtoll(s, &end, 0);
	if (*end != '\0') {
		errno = EINVAL;
		return -1;
	}
	if (errno == ERANGE || v < lo || v > hi) {
		errno = ERANGE;
		return -1;
	}
	*out = v;
	return 0;
}

int
util_parse_f64(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0' || *s == ' ' || *s == '\t') {
		errno = EINVAL;
		return -1;
	}
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || isnan(v)) {
		errno = EINVAL;
		return -1;
	}
	if (errno == ERANGE || v < lo || v > hi) {
		errno = ERANGE;
		return -1;
	}
	*out = v;
	return 0;
}

static char *
read_stream(FILE *fp, size_t *len, const char *name, char *err)
{
	size_t cap = 1 << 16, n = 0, r;
	char *buf = malloc(cap + 1), *nb;

	if (buf == NULL) {
		util_err(err, "%s: out of memory", name);
		return NULL;
	}
	while ((r = fread(buf + n, 1, cap - n, fp)) > 0) {
		n += r;
		if (n < cap)
			continue;
		if (cap > SIZE_MAX / 4 || (nb = realloc(buf, cap * 2 + 1)) == NULL) {
			free(buf);
			util_err(err, "%s: out of memory", name);
			return NULL;
		}
		buf = nb;
		cap *= 2;
	}
	if (ferror(fp)) {
		free(buf);
		util_err(err, "%s: %s", name, strerror(errno));
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

char *
util_read_file(const char *path, size_t *len, char *err)
{
	FILE *fp;
	char *buf;

	if (strcmp(path, "-") == 0)
		return read_stream(stdin, len, "<stdin>", err);
	if ((fp = fopen(path, "rb")) == NULL) {
		util_err(err, "%s: %s", path, strerror(errno));
		return NULL;
	}
	buf = read_stream(fp, len, path, err);
	fclose(fp);
	return buf;
}

struct util_ofile *
util_ofile_open(const char *path, char *err)
{
	struct util_ofile *f = calloc(1, sizeof *f);
	size_t n;
	int fd;

	if (f == NULL) {
		util_err(err, "%s: out of memory", path);
		return NULL;
	}
	if (strcmp(path, "-") == 0) {
		f->fp = stdout;
		return f;
	}
	n = strlen(path) + 32;
	f->path = strdup(path);
	f->tmp = malloc(n);
	if (f->path == NULL || f->tmp == NULL) {
		util_err(err, "%s: out of memory", path);
		goto fail;
	}
	snprintf(f->tmp, n, "%s.tmp.%ld", path, (long)getpid());
	fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0 || (f->fp = fdopen(fd, "wb")) == NULL) {
		util_err(err, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	return f;
fail:
	free(f->path);
	free(f->tmp);
	free(f);
	return NULL;
}

int
util_ofile_commit(struct util_ofile *f, char *err)
{
	int rc = 0;

	if (f->path == NULL) {
		if (fflush(f->fp) != 0)
			rc = util_err(err, "<stdout>: %s", strerror(errno));
		free(f);
		return rc;
	}
	if (fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0)
		rc = util_err(err, "%s: %s", f->path, strerror(errno));
	if (fclose(f->fp) != 0 && rc == 0)
		rc = util_err(err, "%s: %s", f->path, strerror(errno));
	if (rc == 0 && rename(f->tmp, f->path) != 0)
		rc = util_err(err, "%s: %s", f->path, strerror(errno));
	if (rc != 0)
		unlink(f->tmp);
	free(f->path);
	free(f->tmp);
	free(f);
	return rc;
}

void
util_ofile_abort(struct util_ofile *f)
{
	if (f == NULL)
		return;
	if (f->path != NULL) {
		fclose(f->fp);
		unlink(f->tmp);
	}
	free(f->path);
	free(f->tmp);
	free(f);
}

double
util_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void
util_progress_begin(struct util_progress *p, int on, const char *what)
{
	p->on = on;
	p->t0 = p->last = util_now();
	p->what = what;
}

static void
human(char *buf, size_t n, double v)
{
	static const char *unit[] = { "", "k", "M", "G", "T" };
	int u = 0;

	while (v >= 1000 && u < 4) {
		v /= 1000;
		u++;
	}
	snprintf(buf, n, "%.1f%s", v, unit[u]);
}

void
util_progress(struct util_progress *p, uint64_t done, uint64_t total)
{
	double now = util_now(), dt, rate;
	char a[32], b[32], r[32];

	if (!p->on || (now - p->last < 0.2 && done < total))
		return;
	p->last = now;
	dt = now - p->t0;
	rate = dt > 0 ? done / dt : 0;
	human(a, sizeof a, done);
	human(b, sizeof b, total);
	human(r, sizeof r, rate);
	if (total > 0 && rate > 0)
		fprintf(stderr, "\r%s: %s/%s (%3.0f%%) %s/s eta %.0fs   ", p->what, a, b,
		    100.0 * done / total, r, (total - done) / rate);
	else
		fprintf(stderr, "\r%s: %s %s/s   ", p->what, a, r);
}

void
util_progress_end(struct util_progress *p)
{
	if (p->on)
		fputc('\n', stderr);
}

const char *
base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s != NULL ? s + 1 : path;
}

void
warnmsg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void
die(int status, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

int
finish(int status)
{
	if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
		if (status == 0) {
			fprintf(stderr, "%s: <stdout>: %s\n", prog, strerror(errno));
			status = 1;
		}
	}
	return status;
}

#ifdef MEMRA_SAN
void
util_san_range(const void *p, size_t n)
{
	enum { WHOLE = 1 << 16, ENDS = 1 << 12 };
	char *c = (char *)(uintptr_t)p;
	const char *bad;

	if (n <= WHOLE)
		bad = __asan_region_is_poisoned(c, n);
	else if ((bad = __asan_region_is_poisoned(c, ENDS)) == NULL)
		bad = __asan_region_is_poisoned(c + n - ENDS, ENDS);
	if (bad != NULL)	/* an instrumented read of it: ASan's report, and the stop */
		(void)*(const volatile char *)bad;
}
#endif
