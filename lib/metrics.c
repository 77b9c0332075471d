#include "metrics.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct series {
	struct series *next;
	char	*v[METRICS_MAX_LABELS];
	double	x;		/* a counter's or gauge's value; a histogram's sum */
	double	*n;		/* a histogram's [nb + 1] counts by bucket (not cumulative) */
};

struct family {
	enum metrics_type type;
	char	*name, *help;
	char	*lab[METRICS_MAX_LABELS];
	int	nl, nb;
	double	bounds[METRICS_MAX_BUCKETS];
	struct series *head, *tail;
};

struct metrics {
	struct family *f;
	int	n, cap;
	pthread_mutex_t mu;
};

struct metrics *
metrics_new(void)
{
	struct metrics *m = calloc(1, sizeof *m);

	if (m != NULL)
		pthread_mutex_init(&m->mu, NULL);
	return m;
}

static void
series_free(struct series *s)
{
	for (int i = 0; i < METRICS_MAX_LABELS; i++)
		free(s->v[i]);
	free(s->n);
	free(s);
}

static void
family_clear(struct family *f)
{
	for (struct series *s = f->head, *nx; s != NULL; s = nx)
		nx = s->next, series_free(s);
	for (int i = 0; i < f->nl; i++)
		free(f->lab[i]);
	free(f->name), free(f->help);
}

void
metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	for (int i = 0; i < m->n; i++)
		family_clear(&m->f[i]);
	free(m->f);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

/* A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), or with label 1 a label name (no ':', no "__"). */
static int
valid_name(const char *s, size_t n, int label)
{
	if (n == 0 || (label && n >= 2 && s[0] == '_' && s[1] == '_'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
		    (c == ':' && !label) || (i > 0 && c >= '0' && c <= '9')))
			return 0;
	}
	return 1;
}

/* Family f's label names from the list labels; -1 on a bad one. */
static int
label_names(struct family *f, const char *labels)
{
	for (const char *p = labels; *p != '\0';) {
		size_t n = strcspn(p, ",");

		if (f->nl == METRICS_MAX_LABELS || !valid_name(p, n, 1) ||
		    (n == 2 && memcmp(p, "le", 2) == 0) || (f->lab[f->nl] = strndup(p, n)) == NULL)
			return -1;
		f->nl++;
		p += n + (p[n] == ',');
	}
	return 0;
}

static int
family_check(const struct metrics *m, enum metrics_type t, const char *name, const double *b,
    int nb)
{
	size_t n = strlen(name);

	if (!valid_name(name, n, 0) || (t == METRICS_HISTOGRAM) != (nb > 0) ||
	    nb > METRICS_MAX_BUCKETS)
		return -1;
	if ((t == METRICS_COUNTER) != (n > 6 && strcmp(name + n - 6, "_total") == 0))
		return -1;
	for (int i = 0; i < nb; i++)
		if (!isfinite(b[i]) || (i > 0 && b[i] <= b[i - 1]))
			return -1;
	for (int i = 0; i < m->n; i++)
		if (strcmp(m->f[i].name, name) == 0)
			return -1;
	return 0;
}

static struct series *find(struct family *f, const char *const *v, int make);

int
metrics_family(struct metrics *m, enum metrics_type t, const char *name, const char *help,
    const char *labels, const double *bounds, int nb)
{
	struct family *f;
	int rc = -1;

	pthread_mutex_lock(&m->mu);
	if (family_check(m, t, name, bounds, nb) != 0)
		goto out;
	if (m->n == m->cap) {
		int nc = m->cap ? 2 * m->cap : 16;
		struct family *nf = realloc(m->f, (size_t)nc * sizeof *nf);

		if (nf == NULL)
			goto out;
		m->f = nf, m->cap = nc;
	}
	f = &m->f[m->n];
	memset(f, 0, sizeof *f);
	f->type = t, f->nb = nb;
	if (nb > 0)
		memcpy(f->bounds, bounds, (size_t)nb * sizeof *bounds);
	if ((f->name = strdup(name)) == NULL || (f->help = strdup(help)) == NULL ||
	    label_names(f, labels) != 0 || (f->nl == 0 && find(f, NULL, 1) == NULL)) {
		family_clear(f);
		goto out;
	}
	rc = m->n++;
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* The series of f with values v (made when make and new); NULL when none. */
static struct series *
find(struct family *f, const char *const *v, int make)
{
	struct series *s;
	int i;

	for (s = f->head; s != NULL; s = s->next) {
		for (i = 0; i < f->nl && strcmp(s->v[i], v[i]) == 0; i++)
			;
		if (i == f->nl)
			return s;
	}
	if (!make || (s = calloc(1, sizeof *s)) == NULL)
		return NULL;
	for (i = 0; i < f->nl; i++)
		if ((s->v[i] = strdup(v[i] ? v[i] : "")) == NULL)
			break;
	if (i < f->nl || (f->nb > 0 && (s->n = calloc(f->nb + 1, sizeof *s->n)) == NULL)) {
		series_free(s);
		return NULL;
	}
	if (f->tail != NULL)
		f->tail->next = s;
	else
		f->head = s;
	f->tail = s;
	return s;
}

enum op { OP_ADD, OP_SET, OP_OBSERVE };

static int
change(struct metrics *m, int fi, const char *const *v, double x, enum op op)
{
	struct family *f;
	struct series *s;
	int rc = -1, b;

	pthread_mutex_lock(&m->mu);
	if (fi < 0 || fi >= m->n)
		goto out;
	f = &m->f[fi];
	if ((op == OP_OBSERVE) != (f->type == METRICS_HISTOGRAM) ||
	    (op == OP_SET && f->type != METRICS_GAUGE) ||
	    (f->type == METRICS_COUNTER && !(x >= 0)) || (s = find(f, v, 1)) == NULL)
		goto out;
	if (op == OP_OBSERVE) {
		for (b = 0; b < f->nb && x > f->bounds[b]; b++)
			;
		s->n[b]++;
		s->x += x;
	} else
		s->x = op == OP_SET ? x : s->x + x;
	rc = 0;
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int
metrics_add(struct metrics *m, int f, const char *const *v, double x)
{
	return change(m, f, v, x, OP_ADD);
}

int
metrics_set(struct metrics *m, int f, const char *const *v, double x)
{
	return change(m, f, v, x, OP_SET);
}

int
metrics_observe(struct metrics *m, int f, const char *const *v, double x)
{
	return change(m, f, v, x, OP_OBSERVE);
}

double
metrics_get(struct metrics *m, int fi, const char *const *v)
{
	double x = 0;
	struct series *s;

	pthread_mutex_lock(&m->mu);
	if (fi >= 0 && fi < m->n && (s = find(&m->f[fi], v, 0)) != NULL) {
		x = s->x;
		if (m->f[fi].type == METRICS_HISTOGRAM)
			for (int b = x = 0; b <= m->f[fi].nb; b++)
				x += s->n[b];
	}
	pthread_mutex_unlock(&m->mu);
	return x;
}

/* x as Prometheus reads it: the shortest decimal that reads back as x. */
static void
put_num(FILE *fp, double x)
{
	char b[40];

	if (isnan(x)) {
		fputs("NaN", fp);
		return;
	}
	if (isinf(x)) {
		fputs(x > 0 ? "+Inf" : "-Inf", fp);
		return;
	}
	if (x == floor(x) && fabs(x) < 1e15) {
		fprintf(fp, "%.0f", x);
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(b, sizeof b, "%.*g", p, x);
		if (strtod(b, NULL) == x)
			break;
	}
	fputs(b, fp);
}

/* s with \ " and newline escaped (quoted 1: a label value, else help text). */
static void
put_escaped(FILE *fp, const char *s, int quoted)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", fp);
		else if (*s == '\n')
			fputs("\\n", fp);
		else if (*s == '"' && quoted)
			fputs("\\\"", fp);
		else
			fputc(*s, fp);
	}
}

/* NAME{labels[,le="bound"]} value */
static void
put_sample(FILE *fp, const struct family *f, const struct series *s, const char *suffix,
    const double *le, double x)
{
	fprintf(fp, "%s%s", f->name, suffix);
	if (f->nl > 0 || le != NULL) {
		fputc('{', fp);
		for (int i = 0; i < f->nl; i++) {
			fprintf(fp, "%s%s=\"", i ? "," : "", f->lab[i]);
			put_escaped(fp, s->v[i], 1);
			fputc('"', fp);
		}
		if (le != NULL) {
			fprintf(fp, "%sle=\"", f->nl ? "," : "");
			put_num(fp, *le);
			fputc('"', fp);
		}
		fputc('}', fp);
	}
	fputc(' ', fp);
	put_num(fp, x);
	fputc('\n', fp);
}

static void
put_family(FILE *fp, const struct family *f)
{
	static const char *const tn[] = { "counter", "gauge", "histogram" };
	static const double inf = INFINITY;

	fprintf(fp, "# HELP %s ", f->name);
	put_escaped(fp, f->help, 0);
	fprintf(fp, "\n# TYPE %s %s\n", f->name, tn[f->type]);
	for (const struct series *s = f->head; s != NULL; s = s->next) {
		double cum = 0;

		if (f->type != METRICS_HISTOGRAM) {
			put_sample(fp, f, s, "", NULL, s->x);
			continue;
		}
		for (int b = 0; b <= f->nb; b++) {
			cum += s->n[b];
			put_sample(fp, f, s, "_bucket", b < f->nb ? &f->bounds[b] : &inf, cum);
		}
		put_sample(fp, f, s, "_sum", NULL, s->x);
		put_sample(fp, f, s, "_count", NULL, cum);
	}
}

char *
metrics_render(struct metrics *m, size_t *len)
{
	char *b = NULL;
	FILE *fp = open_memstream(&b, len);

	if (fp == NULL)
		return NULL;
	pthread_mutex_lock(&m->mu);
	for (int i = 0; i < m->n; i++)
		put_family(fp, &m->f[i]);
	pthread_mutex_unlock(&m->mu);
	if (fclose(fp) != 0) {
		free(b);
		return NULL;
	}
	return b;
}

/* The boot time (seconds since the epoch) from /proc/stat; 0 when unknown. */
static double
boot_time(void)
{
	FILE *fp = fopen("/proc/stat", "r");
	char line[256];
	double bt = 0;

	while (fp != NULL && fgets(line, sizeof line, fp) != NULL)
		if (sscanf(line, "btime %lf", &bt) == 1)
			break;
	if (fp != NULL)
		fclose(fp);
	return bt;
}

static double
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	double n = -1;	/* the directory's own descriptor */

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int
metrics_proc_read(struct metrics_proc *p)
{
	FILE *fp = fopen("/proc/self/stat", "r");
	char buf[1024], *s;
	unsigned long long ut, st, start, vsize, threads;
	long long rss;
	double tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct rlimit rl;
	size_t n;

	memset(p, 0, sizeof *p);
	if (fp == NULL)
		return -1;
	n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	/* after "pid (comm) ": state is field 3; utime 14, stime 15, threads 20,
	 * start 22, vsize 23, rss 24 */
	if ((s = strrchr(buf, ')')) == NULL || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
	    "%*u %*u %llu %llu %*d %*d %*d %*d %llu %*d %llu %llu %lld", &ut, &st, &threads, &start,
	    &vsize, &rss) != 6)
		return -1;
	p->cpu_seconds = (ut + st) / tick;
	p->threads = threads;
	p->start_time = boot_time() + start / tick;
	p->vsize_bytes = vsize, p->rss_bytes = rss * page;
	p->open_fds = count_fds();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		p->max_fds = rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur;
	return 0;
}
