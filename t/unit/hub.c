#include <stdlib.h>

#include "hub.h"
#include "test.h"
#include "util.h"

static struct hub_spec
spec(const char *s)
{
	struct hub_spec sp;
	char err[UTIL_ERRLEN];

	if (hub_spec_parse(&sp, s, err) != 0)
		FAILF("hub_spec_parse(%s): %s", s, err);
	return sp;
}

TEST(parses_spec_forms)
{
	struct hub_spec s = spec("hf:o/r");

	CHECK_EQ_STR(s.repo, "o/r");
	CHECK_EQ_STR(s.revision, "");
	CHECK_EQ_STR(s.pattern, "");
	CHECK_EQ_INT(s.dataset, 0);
	s = spec("hf:Avifenesh/Qwen3.8-27B-NVFP4-MTP-GGUF:Q5K-mtp");
	CHECK_EQ_STR(s.repo, "Avifenesh/Qwen3.8-27B-NVFP4-MTP-GGUF");
	CHECK_EQ_STR(s.pattern, "Q5K-mtp");
	s = spec("hf:o/r@refs/pr/1:a:b");
	CHECK_EQ_STR(s.revision, "refs/pr/1");
	CHECK_EQ_STR(s.pattern, "a:b");
	s = spec("hfds:o/d:*.jsonl");
	CHECK_EQ_INT(s.dataset, 1);
	CHECK_EQ_STR(s.pattern, "*.jsonl");
	s = spec("hf:gpt2");
	CHECK_EQ_STR(s.repo, "gpt2");
	CHECK_EQ_INT(s.exact, 0);
	s = spec("hf:o/r/Q4_K_M/m-00002-of-00003.gguf");	/* a path: exact, as hf:// names files */
	CHECK_EQ_STR(s.repo, "o/r");
	CHECK_EQ_STR(s.pattern, "Q4_K_M/m-00002-of-00003.gguf");
	CHECK_EQ_INT(s.exact, 1);
	s = spec("hfds:o/d/sub/a@b:c.jsonl");	/* '@' and ':' belong to the path */
	CHECK_EQ_STR(s.repo, "o/d");
	CHECK_EQ_STR(s.revision, "");
	CHECK_EQ_STR(s.pattern, "sub/a@b:c.jsonl");
	CHECK_EQ_INT(s.exact, 1);
	s = spec("hf:o/r@v1/x:y");	/* with a revision the path comes after ':' */
	CHECK_EQ_STR(s.revision, "v1/x");
	CHECK_EQ_STR(s.pattern, "y");
	CHECK_EQ_INT(s.exact, 0);
	CHECK(hub_is_spec("hf:x") && hub_is_spec("hfds:x") && !hub_is_spec("h:x") && !hub_is_spec("./hf:x"));
}

TEST(rejects_bad_specs)
{
	static const char *bad[] = {
		"o/r", "hf:", "hf:o/", "hf:/r", "hf:o/r/", "hf:o/r/../x", "hf:o/r//x", "hf:o/r/a/./b", "hf:o/r:", "hf:o/r@:x", "hf:o/r@../x",
		"hf:o/r@a//b", "hf:o r/x", "hf:../r", "hf:o/..", "hf:o/r@/abs",
	};
	struct hub_spec s;
	char err[UTIL_ERRLEN];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (hub_spec_parse(&s, bad[i], err) == 0)
			FAILF("'%s' parsed", bad[i]);
}

TEST(reads_headers_like_huggingface_hub)
{
	struct hub_meta m;
	static const char *lines[] = {
		"HTTP/1.1 302 Found\r\n", "x-repo-commit: 0123456789abcdef0123456789abcdef01234567\r\n",
		"ETag: W/\"abc\"\r\n", "X-Linked-Etag:  \"e3b0c442\"  \r\n", "X-Linked-Size: 12345\r\n",
		"Content-Length: 9x\r\n", "Retry-After: 3\r\n", "X-Error-Code: RepoNotFound\r\n", "junk\r\n",
	};
	size_t i;

	hub_meta_reset(&m);
	for (i = 0; i < sizeof lines / sizeof lines[0]; i++)
		hub_meta_header(&m, lines[i], strlen(lines[i]));
	CHECK_EQ_INT(m.status, 302);
	CHECK_EQ_STR(m.commit, "0123456789abcdef0123456789abcdef01234567");
	CHECK_EQ_STR(m.etag, "abc");
	CHECK_EQ_STR(m.linked_etag, "e3b0c442");
	CHECK_EQ_INT(m.linked_size, 12345);
	CHECK_EQ_INT(m.content_length, -1);
	CHECK_EQ_INT(m.retry_after, 3);
	CHECK_EQ_STR(m.error_code, "RepoNotFound");
	hub_meta_header(&m, "HTTP/2 200\r\n", 12);	/* a new response forgets the last */
	CHECK_EQ_INT(m.status, 200);
	CHECK_EQ_STR(m.commit, "");
	CHECK_EQ_INT(m.linked_size, -1);
}

static const char revision_json[] =
    "{\"id\": \"o/r\", \"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": ["
    "{\"rfilename\": \"config.json\", \"size\": 20, \"blobId\": \"aa\"},"
    "{\"rfilename\": \"m-Q5K-mtp.gguf\", \"size\": 130, \"blobId\": \"bb\", \"lfs\": {\"sha256\": "
    "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\", \"size\": 9000}},"
    "{\"rfilename\": \"m-Q8_0.gguf\"},"
    "{\"rfilename\": \"s/big-00002-of-00003.gguf\"}, {\"rfilename\": \"s/big-00001-of-00003.gguf\"},"
    "{\"rfilename\": \"s/big-00003-of-00003.gguf\"}, {\"rfilename\": \"t/x-00001-of-00002.gguf\"},"
    "{\"rfilename\": \"r/ranks.gguf.txt\"}, {\"rfilename\": \"r/ranks.gguf\"}]}";

TEST(parses_revision_listing)
{
	struct hub_listing l;
	char err[UTIL_ERRLEN];

	CHECK(hub_listing_parse(&l, revision_json, strlen(revision_json), 0, err) == 0);
	CHECK_EQ_STR(l.commit, "0123456789abcdef0123456789abcdef01234567");
	CHECK_EQ_INT(l.n, 9);
	CHECK_EQ_INT(l.e[0].size, 20);
	CHECK_EQ_STR(l.e[0].blob_id, "aa");
	CHECK_EQ_STR(l.e[0].sha256, "");
	CHECK_EQ_INT(l.e[1].size, 9000);	/* the LFS size, not the pointer's */
	CHECK_EQ_STR(l.e[1].sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	CHECK(l.e[2].size == HUB_UNKNOWN_SIZE);
	hub_listing_free(&l);
}

TEST(rejects_unsafe_listings)
{
	static const char *bad[] = {
		"{\"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": [{\"rfilename\": \"../x\"}]}",
		"{\"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": [{\"rfilename\": \"/etc/x\"}]}",
		"{\"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": [{\"rfilename\": \"a//b\"}]}",
		"{\"sha\": \"../../../../tmp/x\", \"siblings\": []}",
		"{\"sha\": \"0123456789ABCDEF0123456789abcdef01234567\", \"siblings\": []}",
		"{\"sha\": \"0123456789abcdef0123456789abcdef01234567\"}",
		"{\"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": [{\"rfilename\": \"a\","
		    " \"lfs\": {\"sha256\": \"../x\"}}]}",
		"[]",
	};
	struct hub_listing l;
	char err[UTIL_ERRLEN];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (hub_listing_parse(&l, bad[i], strlen(bad[i]), 0, err) == 0)
			FAILF("listing %zu accepted", i);
		hub_listing_free(&l);
	}
}

TEST(parses_tree_cache_of_huggingface_hub)
{
	const char *t = "{\"format_version\": 1, \"files\": {\"a.txt\": {\"size\": 3, \"blob_id\": \"ab\"},"
	    " \"w.bin\": {\"size\": 5, \"blob_id\": \"cd\", \"lfs_sha256\": "
	    "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\", \"lfs_size\": 5}}}";
	struct hub_listing l;
	char err[UTIL_ERRLEN];

	CHECK(hub_listing_parse(&l, t, strlen(t), 1, err) == 0);
	CHECK_EQ_INT(l.n, 2);
	CHECK_EQ_STR(l.e[1].name, "w.bin");
	CHECK_EQ_INT(l.e[1].size, 5);
	CHECK_EQ_INT(strlen(l.e[1].sha256), 64);
	hub_listing_free(&l);
	CHECK(hub_listing_parse(&l, "{\"format_version\": 2, \"files\": {}}", 34, 1, err) != 0);
	hub_listing_free(&l);
}

/* select spec against revision_json: the chosen names joined by ' ', or the error */
static void
pick(const char *s, const struct hub_opts *o, char *out, size_t cap)
{
	struct hub_listing l;
	struct hub_spec sp = spec(s);
	char err[UTIL_ERRLEN];
	size_t *sel, n, i, at = 0;
	long first;

	hub_listing_parse(&l, revision_json, strlen(revision_json), 0, err);
	if (hub_select(&l, &sp, o, &sel, &n, &first, err) != 0)
		snprintf(out, cap, "error: %s", err);
	else {
		out[0] = '\0';
		for (i = 0; i < n; i++)
			at += snprintf(out + at, cap - at, "%s%s", i ? " " : "", l.e[sel[i]].name);
		if (first > 0)
			FAILF("first part is %ld", first);
	}
	free(sel);
	hub_listing_free(&l);
}

TEST(selects_by_substring_split_and_glob)
{
	struct hub_opts o;
	char got[UTIL_ERRLEN * 2];
	char *inc[] = { "*.gguf" }, *exc[] = { "s/" };

	hub_opts_init(&o);
	pick("hf:o/r:Q5K", &o, got, sizeof got);
	CHECK_EQ_STR(got, "m-Q5K-mtp.gguf");
	pick("hf:o/r:big-00003", &o, got, sizeof got);
	CHECK_EQ_STR(got, "s/big-00001-of-00003.gguf s/big-00002-of-00003.gguf s/big-00003-of-00003.gguf");
	pick("hf:o/r:big", &o, got, sizeof got);
	CHECK_EQ_STR(got, "s/big-00001-of-00003.gguf s/big-00002-of-00003.gguf s/big-00003-of-00003.gguf");
	pick("hf:o/r:x-0000", &o, got, sizeof got);
	CHECK_EQ_STR(got, "error: split part 't/x-00002-of-00002.gguf' (2 of 2) is missing");
	pick("hf:o/r/s/big-00002-of-00003.gguf", &o, got, sizeof got);	/* a path: its whole set */
	CHECK_EQ_STR(got, "s/big-00001-of-00003.gguf s/big-00002-of-00003.gguf s/big-00003-of-00003.gguf");
	pick("hf:o/r/t/x-00001-of-00002.gguf", &o, got, sizeof got);
	CHECK_EQ_STR(got, "error: split part 't/x-00002-of-00002.gguf' (2 of 2) is missing");
	pick("hf:o/r/r/ranks.gguf", &o, got, sizeof got);
	CHECK_EQ_STR(got, "r/ranks.gguf");
	pick("hf:o/r/ranks.gguf", &o, got, sizeof got);	/* a path is matched whole */
	CHECK(strncmp(got, "error: no file 'ranks.gguf' (9 files): 'config.json'", 52) == 0);
	pick("hfds:o/r/config.json", &o, got, sizeof got);
	CHECK_EQ_STR(got, "config.json");
	pick("hf:o/r:m-Q", &o, got, sizeof got);
	CHECK_EQ_STR(got, "error: 'm-Q' matches 2 files: 'm-Q5K-mtp.gguf', 'm-Q8_0.gguf'");
	pick("hf:o/r:0000", &o, got, sizeof got);
	CHECK(strncmp(got, "error: '0000' matches 4 files", 29) == 0);
	pick("hf:o/r:zzz", &o, got, sizeof got);
	CHECK(strncmp(got, "error: no file name contains 'zzz' (9 files): 'config.json'", 59) == 0);
	pick("hf:o/r:ranks.gguf", &o, got, sizeof got);	/* the exact name wins */
	CHECK_EQ_STR(got, "r/ranks.gguf");
	pick("hf:o/r:ranks", &o, got, sizeof got);
	CHECK_EQ_STR(got, "error: 'ranks' matches 2 files: 'r/ranks.gguf.txt', 'r/ranks.gguf'");
	pick("hfds:o/r:*.json", &o, got, sizeof got);
	CHECK_EQ_STR(got, "config.json");
	pick("hfds:o/r:s/*", &o, got, sizeof got);
	CHECK_EQ_STR(got, "s/big-00002-of-00003.gguf s/big-00001-of-00003.gguf s/big-00003-of-00003.gguf");
	o.include = inc, o.ninclude = 1, o.exclude = exc, o.nexclude = 1;
	pick("hf:o/r", &o, got, sizeof got);
	CHECK_EQ_STR(got, "m-Q5K-mtp.gguf m-Q8_0.gguf t/x-00001-of-00002.gguf r/ranks.gguf");
	inc[0] = "nothing";
	pick("hf:o/r", &o, got, sizeof got);
	CHECK_EQ_STR(got, "error: no file left after --include/--exclude (9 files)");
}

TEST(hub_path_passes_other_arguments_through)
{
	char err[UTIL_ERRLEN], *p = hub_path("model.gguf", NULL, err);

	CHECK_EQ_STR(p, "model.gguf");
	free(p);
}

/* A cache laid out by hand, as huggingface_hub leaves it, resolves offline. */
TEST(hub_path_resolves_a_hand_made_cache_offline)
{
	char dir[] = "/tmp/hub-unit-XXXXXX", cmd[1024], err[UTIL_ERRLEN], want[512], *p;
	struct hub_opts o;
	const char *c = "0123456789abcdef0123456789abcdef01234567";

	CHECK(mkdtemp(dir) != NULL);
	snprintf(cmd, sizeof cmd, "cd %s && mkdir -p models--o--r/blobs models--o--r/refs "
	    "models--o--r/snapshots/%s && echo hi >models--o--r/blobs/e1 && printf %s >models--o--r/refs/main && "
	    "ln -s ../../blobs/e1 models--o--r/snapshots/%s/w-Q5K.gguf", dir, c, c, c);
	CHECK(system(cmd) == 0);
	hub_opts_init(&o);
	o.cache = dir;
	o.offline = 1;
	snprintf(want, sizeof want, "%s/models--o--r/snapshots/%s/w-Q5K.gguf", dir, c);
	p = hub_path("hf:o/r:Q5K", &o, err);
	CHECK_EQ_STR(p, want);
	free(p);
	p = hub_path("hf:o/r:Q8", &o, err);
	CHECK(p == NULL);
	CHECK(strncmp(err, "hf:o/r:Q8: no file name contains 'Q8' (1 files): 'w-Q5K.gguf'", 60) == 0);
	snprintf(want, sizeof want, "%s/models--o--r/snapshots/%s", dir, c);
	p = hub_path("hf:o/r", &o, err);	/* offline, a snapshot without a listing will do */
	CHECK_EQ_STR(p, want);
	free(p);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

int
main(void)
{
	RUN(parses_spec_forms);
	RUN(rejects_bad_specs);
	RUN(reads_headers_like_huggingface_hub);
	RUN(parses_revision_listing);
	RUN(rejects_unsafe_listings);
	RUN(parses_tree_cache_of_huggingface_hub);
	RUN(selects_by_substring_split_and_glob);
	RUN(hub_path_passes_other_arguments_through);
	RUN(hub_path_resolves_a_hand_made_cache_offline);
	return test_summary();
}
