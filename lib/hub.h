/*
 * hub: `hf:` and `hfds:` specs resolved to files in the Hugging Face hub
 * cache, fetching what is missing over the hub's HTTP API (libcurl).
 *
 *   hf:owner/repo[@revision]              the repo snapshot directory
 *   hf:owner/repo[@revision]:substring    the one file whose path contains it
 *                                         (a name equal to it wins over longer ones;
 *                                         a split GGUF -0000K-of-0000N: all parts)
 *   hf:owner/repo/path                    the file at path (a split GGUF part: all
 *                                         parts); no revision: use @revision:path
 *   hfds:owner/name[@revision][:glob]     a dataset: the snapshot, or each match
 *   hfds:owner/name/path                  a dataset's file at path
 *
 * The cache is huggingface_hub's, byte for byte: under HF_HUB_CACHE
 * (default $HF_HOME/hub, default ~/.cache/huggingface/hub)
 *   models--owner--repo/blobs/<etag>
 *   models--owner--repo/snapshots/<commit>/<path> -> ../../blobs/<etag>
 *   models--owner--repo/refs/<revision>           the commit, no newline
 *   models--owner--repo/trees/<commit>.json       the file listing
 *   .locks/models--owner--repo/<etag>.lock        flock(2) while a blob is written
 * so files either side downloaded are reused by the other.  A spec whose
 * files are all in the cache resolves without any request.
 *
 * Without libcurl (MEMRA_HAVE_CURL unset) cached specs still resolve and a
 * miss says that hf: specs need a libcurl build.
 */
#ifndef MEMRA_HUB_H
#define MEMRA_HUB_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define HUB_UNKNOWN_SIZE UINT64_MAX

/* 1 when s starts with "hf:" or "hfds:" (no other check). */
int	hub_is_spec(const char *s);

/* A parsed spec.  pattern is "" for a whole repo. */
struct hub_spec {
	int	dataset;	/* hfds: */
	char	repo[256];	/* owner/name */
	char	revision[256];	/* "" when the spec names none */
	char	pattern[1024];	/* substring (models) or glob (datasets); the path when exact */
	int	exact;		/* owner/repo/path: pattern is a path in the repo */
};

/* Parse spec into *s.  Returns 0, or -1 with the reason in err (UTIL_ERRLEN). */
int	hub_spec_parse(struct hub_spec *s, const char *spec, char *err);

/*
 * How to resolve.  hub_opts_init sets every field to its default; NULL
 * strings and offline -1 are read from the environment at resolve time
 * (HF_ENDPOINT, HF_HUB_CACHE / HF_HOME, HF_TOKEN / HF_TOKEN_PATH /
 * $HF_HOME/token, HF_HUB_OFFLINE).  The token is sent only to the endpoint's
 * origin and never appears in a message.
 */
struct hub_opts {
	const char *endpoint;	/* NULL: $HF_ENDPOINT or https://huggingface.co */
	const char *cache;	/* NULL: the hub cache directory above */
	const char *token;	/* NULL: from the environment; "" sends none */
	const char *revision;	/* used when the spec names none; NULL: "main" */
	char *const *include;	/* [ninclude] globs: whole-repo fetches keep matches */
	size_t	ninclude;
	char *const *exclude;	/* [nexclude] globs: and drop these */
	size_t	nexclude;
	int	offline;	/* 1 cache only, 0 network allowed, -1 from HF_HUB_OFFLINE */
	int	dry_run;	/* list what would be fetched; write nothing */
	int	refresh;	/* ask the hub for the revision even when the cache has the spec */
	int	retries;	/* per request on connection loss, 408, 429, 5xx */
	int	jobs;		/* files fetched at once */
	int	connections;	/* range requests at once for one large file */
	uint64_t chunk;		/* range size; files of two chunks or more are split */
	/* Called with one line of news (fetching, retrying); may be NULL. */
	void	(*log)(void *arg, const char *msg);
	/* Called with the bytes done and to do over the whole call (serialized). */
	void	(*progress)(void *arg, uint64_t done, uint64_t total);
	void	*arg;
	/* When set and it becomes nonzero, transfers stop, keeping what they have. */
	volatile sig_atomic_t *cancel;
};

void	hub_opts_init(struct hub_opts *o);

/* One file a spec resolved to. */
struct hub_file {
	char	*name;		/* path inside the repo */
	char	*path;		/* snapshots/<commit>/<name> in the cache */
	uint64_t size;		/* bytes, or HUB_UNKNOWN_SIZE */
	int	cached;		/* was in the cache before this call */
};

struct hub_result {
	char	commit[41];
	char	**paths;	/* [npaths] what the spec names: snapshot dir, file, first part */
	size_t	npaths;
	struct hub_file *files;	/* [nfiles] every file involved */
	size_t	nfiles;
};

/*
 * Resolve spec (hf:/hfds:) into *r, fetching missing files unless offline
 * or dry_run (then paths name where they would be).  Returns 0, or -1 with
 * "spec: why" in err; a partial transfer stays as blobs/<etag>.incomplete
 * to be resumed.  Free *r with hub_result_free (also after a failure).
 * Calls may run in several threads at once (libcurl 7.84 or later).
 */
int	hub_resolve(const char *spec, const struct hub_opts *o, struct hub_result *r, char *err);
void	hub_result_free(struct hub_result *r);

/*
 * For callers taking a model argument: a hub spec becomes its first local
 * path (fetched as needed; o may be NULL for defaults), anything else is
 * returned as is.  Returns a malloc'd string, or NULL with err set.
 */
char	*hub_path(const char *spec, const struct hub_opts *o, char *err);

/* --- parsers of server text, exported for tests and fuzzing --- */

/* What a response's headers said. */
struct hub_meta {
	int	status;
	char	commit[64];	/* X-Repo-Commit */
	char	etag[160];	/* ETag, normalized: no W/, no quotes */
	char	linked_etag[160];	/* X-Linked-Etag, normalized */
	int64_t	linked_size;	/* X-Linked-Size, -1 absent */
	int64_t	content_length;	/* -1 absent */
	int	retry_after;	/* seconds, -1 absent */
	char	error_code[64];	/* X-Error-Code */
};

void	hub_meta_reset(struct hub_meta *m);
/* Take one raw header line ("Name: value\r\n"); other lines are ignored. */
void	hub_meta_header(struct hub_meta *m, const char *line, size_t n);

/* A repo file listing at one commit. */
struct hub_entry {
	char	*name;
	uint64_t size;		/* HUB_UNKNOWN_SIZE when not given */
	char	blob_id[48];	/* git oid, "" when not given */
	char	sha256[65];	/* LFS oid, "" for plain git files */
};
struct hub_listing {
	char	commit[41];
	struct hub_entry *e;	/* [n] */
	size_t	n;
};

/*
 * Parse /api/{models,datasets}/<repo>/revision/<rev> JSON (tree=0: "sha" and
 * "siblings"), or a trees/<commit>.json cache file (tree=1: "files"; the
 * commit is left ""). File names must be safe relative paths.  Returns 0,
 * or -1 with err set; free with hub_listing_free (also after failure).
 */
int	hub_listing_parse(struct hub_listing *l, const char *json, size_t n, int tree, char *err);
void	hub_listing_free(struct hub_listing *l);

/*
 * The entries of l that s names: sel[*nsel] (indices, every file to have)
 * and *first, the one to print for a file spec (-1 for a whole repo or a
 * dataset glob, where every selected file is named).  include/exclude only
 * filter whole-repo specs.  Returns 0, or -1 with err listing candidates
 * when nothing or several unrelated files match.  sel is malloc'd.
 */
int	hub_select(const struct hub_listing *l, const struct hub_spec *s, const struct hub_opts *o,
	    size_t **sel, size_t *nsel, long *first, char *err);

#endif
