/*
 * hf-fetch: resolve hf:/hfds: specs into the Hugging Face hub cache,
 * fetching what is missing, and print the local path of each.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hub.h"
#include "util.h"

static volatile sig_atomic_t cancelled;

struct fetch_opts {
	struct hub_opts hub;
	int	verbose, quiet;
	struct util_progress bar;
	char	**include, **exclude;
	size_t	ninclude, nexclude;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [-fnqv] [-c connections] [-j jobs] [-r revision] [--chunk-size bytes]\n"
	    "\t[--exclude glob] [--include glob] [--offline] [--retries n] [--token token]\n"
	    "\tspec ...\n", prog);
	return status;
}

static void
on_signal(int sig)
{
	(void)sig;
	cancelled = 1;
}

static void
on_log(void *arg, const char *msg)
{
	struct fetch_opts *o = arg;

	if (o->verbose)
		warnmsg("%s", msg);
}

static void
on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct fetch_opts *o = arg;

	util_progress(&o->bar, done, total);
}

static int
add_glob(char ***v, size_t *n, char *g)
{
	char **nv = realloc(*v, (*n + 1) * sizeof *nv);

	if (nv == NULL)
		die(1, "out of memory");
	nv[(*n)++] = g;
	*v = nv;
	return 0;
}

static void
print_dry(const struct hub_result *r)
{
	uint64_t want = 0;
	size_t i, n = 0;

	for (i = 0; i < r->nfiles; i++) {
		const struct hub_file *f = &r->files[i];

		if (f->size == HUB_UNKNOWN_SIZE)
			printf("%s\t?\t%s\n", f->cached ? "cached" : "fetch", f->path);
		else
			printf("%s\t%llu\t%s\n", f->cached ? "cached" : "fetch", (unsigned long long)f->size, f->path);
		if (!f->cached) {
			n++;
			want += f->size == HUB_UNKNOWN_SIZE ? 0 : f->size;
		}
	}
	warnmsg("dry run: %zu of %zu files to fetch, %llu bytes", n, r->nfiles, (unsigned long long)want);
}

/* Resolve one spec and print its paths: 0, 1 (failed) or 2 (not a spec). */
static int
fetch(const char *spec, struct fetch_opts *o)
{
	struct hub_spec s;
	struct hub_result r;
	char err[UTIL_ERRLEN];
	size_t i;
	int on = !o->quiet && (o->verbose || isatty(STDERR_FILENO)) && !o->hub.dry_run;

	if (hub_spec_parse(&s, spec, err) != 0) {
		warnmsg("%s: %s", spec, err);
		return 2;
	}
	util_progress_begin(&o->bar, on, spec);
	if (hub_resolve(spec, &o->hub, &r, err) != 0) {
		if (o->bar.last > o->bar.t0)
			util_progress_end(&o->bar);
		warnmsg("%s", err);
		hub_result_free(&r);
		return 1;
	}
	if (o->bar.last > o->bar.t0)
		util_progress_end(&o->bar);
	if (o->hub.dry_run)
		print_dry(&r);
	else
		for (i = 0; i < r.npaths; i++)
			printf("%s\n", r.paths[i]);
	hub_result_free(&r);
	return 0;
}

/* Keep a copy of a secret argument and blank it out of ps(1). */
static const char *
secret(char *arg)
{
	char *copy = strdup(arg);

	if (copy == NULL)
		die(1, "out of memory");
	memset(arg, '*', strlen(arg));
	return copy;
}

static int64_t
number(const char *s, const char *what, int64_t lo, int64_t hi)
{
	int64_t v;

	if (util_parse_i64(s, lo, hi, &v) != 0) {
		warnmsg("%s: '%s' is not a number in [%lld, %lld]", what, s, (long long)lo, (long long)hi);
		exit(usage(stderr, 2));
	}
	return v;
}

int
main(int argc, char *argv[])
{
	static const struct option lopts[] = {
		{ "connections", required_argument, NULL, 'c' }, { "jobs", required_argument, NULL, 'j' },
		{ "dry-run", no_argument, NULL, 'n' }, { "quiet", no_argument, NULL, 'q' },
		{ "revision", required_argument, NULL, 'r' }, { "verbose", no_argument, NULL, 'v' },
		{ "chunk-size", required_argument, NULL, 'C' }, { "exclude", required_argument, NULL, 'E' },
		{ "include", required_argument, NULL, 'I' }, { "offline", no_argument, NULL, 'O' },
		{ "refresh", no_argument, NULL, 'f' },
		{ "retries", required_argument, NULL, 'R' }, { "token", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct fetch_opts o = { 0 };
	struct sigaction sa = { 0 };
	int ch, i, status = 0, r;

	prog = base_name(argv[0]);
	hub_opts_init(&o.hub);
	while ((ch = getopt_long(argc, argv, "c:fj:nqr:vh", lopts, NULL)) != -1) {
		switch (ch) {
		case 'c': o.hub.connections = (int)number(optarg, "--connections", 1, 64); break;
		case 'f': o.hub.refresh = 1; break;
		case 'j': o.hub.jobs = (int)number(optarg, "--jobs", 1, 64); break;
		case 'n': o.hub.dry_run = 1; break;
		case 'q': o.quiet = 1, o.verbose = 0; break;
		case 'r': o.hub.revision = optarg; break;
		case 'v': o.verbose = 1, o.quiet = 0; break;
		case 'C': o.hub.chunk = (uint64_t)number(optarg, "--chunk-size", 4096, INT64_MAX / 4); break;
		case 'E': add_glob(&o.exclude, &o.nexclude, optarg); break;
		case 'I': add_glob(&o.include, &o.ninclude, optarg); break;
		case 'O': o.hub.offline = 1; break;
		case 'R': o.hub.retries = (int)number(optarg, "--retries", 0, 100); break;
		case 'T': o.hub.token = secret(optarg); break;
		case 'h': return usage(stdout, 0);
		default:  return usage(stderr, 2);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		return usage(stderr, 2);
	o.hub.include = o.include, o.hub.ninclude = o.ninclude;
	o.hub.exclude = o.exclude, o.hub.nexclude = o.nexclude;
	o.hub.log = on_log;
	o.hub.progress = on_progress;
	o.hub.arg = &o;
	o.hub.cancel = &cancelled;
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (i = 0; i < argc && !cancelled; i++) {
		r = fetch(argv[i], &o);
		if (r > status)
			status = r;
	}
	free(o.include);
	free(o.exclude);
	if (o.hub.token != NULL) {
		memset((char *)o.hub.token, 0, strlen(o.hub.token));
		free((char *)o.hub.token);
	}
	if (status == 2)
		return finish(usage(stderr, 2));
	return finish(status);
}
