/*
 * util: the few helpers every module and every binary shares.
 *
 * Two halves.  The library half (util_*) never prints and never exits:
 * error buffers, strict number parsing, whole-file reads, atomic output
 * files.  The command half (prog, die, warnmsg, finish, base_name) is for
 * bin/ only: library code must not call it, because serve links the same
 * library and must never exit on a bad request.
 */
#ifndef MEMRA_UTIL_H
#define MEMRA_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define UTIL_ERRLEN 512

/* Format a message into buf[UTIL_ERRLEN]; returns -1 so that
 * `return util_err(o->err, "...")` reads as a failure. */
int	util_err(char *buf, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* Strict parsers: the whole string must be a number in [lo, hi].
 * Return 0, or -1 (errno EINVAL or ERANGE) leaving *out untouched. */
int	util_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int	util_parse_f64(const char *s, double lo, double hi, double *out);

/*
 * Read a whole file ("-" is stdin) into a malloc'd buffer with a NUL
 * after the last byte (not counted in *len).  Returns NULL on failure
 * with the reason in err (UTIL_ERRLEN).  Caller frees.
 */
char	*util_read_file(const char *path, size_t *len, char *err);

/*
 * Atomic output: writes go to "<path>.tmp.<pid>", util_ofile_commit
 * flushes, fsyncs and renames over path; util_ofile_abort removes the
 * temporary.  path "-" writes straight to stdout (commit only flushes).
 * Both free the handle; abort(NULL) is a no-op.
 */
struct util_ofile {
	FILE	*fp;
	char	*path;	/* final name, NULL for stdout */
	char	*tmp;
};
struct util_ofile *util_ofile_open(const char *path, char *err);
int	util_ofile_commit(struct util_ofile *, char *err);
void	util_ofile_abort(struct util_ofile *);

/*
 * Hot loops under the sanitizers (make SAN=1 defines MEMRA_SAN): ASan checks
 * each vector load and store wider than 16 bytes by a call, which made the
 * CPU backend's float products most of a sanitized test's time.
 * UTIL_SAN_HOT turns ASan's and UBSan's checks off in one function; the
 * function, or its caller once for many calls, then checks the ranges it
 * reads or writes with util_san_range: a byte of the range that is not
 * addressable is ASan's report, from there (its stack through the caller).
 * A range up to 64 KiB is checked whole, a longer one (a weight matrix)
 * its first and last 4 KiB: a size that runs past its allocation.  Both
 * are nothing in other builds.
 */
#ifdef MEMRA_SAN
#define UTIL_SAN_HOT	__attribute__((no_sanitize("address", "undefined")))
void	util_san_range(const void *p, size_t n);
#else
#define UTIL_SAN_HOT
#define util_san_range(p, n)	((void)0)
#endif

/* Monotonic seconds, for timings. */
double	util_now(void);

/* A tty-aware progress line on stderr; no-op when not enabled. */
struct util_progress {
	int	on;
	double	t0, last;
	const char *what;
};
void	util_progress_begin(struct util_progress *, int on, const char *what);
void	util_progress(struct util_progress *, uint64_t done, uint64_t total);
void	util_progress_end(struct util_progress *);

/* --- command half: bin/ only --- */
extern const char *prog;

const char *base_name(const char *path);
/* Print "prog: fmt" and a newline on stderr. */
void	warnmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* warnmsg, then exit(status). */
_Noreturn void die(int status, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Flush and close stdout; a write error turns status 0 into 1. */
int	finish(int status);

#endif
