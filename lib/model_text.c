/* model_text: the text side of a model's source: tokenizer, chat template */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "hub.h"
#include "json.h"
#include "model_impl.h"
#include "tokenizer.h"
#include "util.h"

struct model *
model_open_text(const char *path, char *err)
{
	struct model *md = calloc(1, sizeof *md);
	char magic[4] = { 0 };
	struct stat sb;
	FILE *fp;

	if (md == NULL) {
		util_err(err, "%s: out of memory", path);
		return NULL;
	}
	if ((md->path = hub_is_spec(path) ? hub_path(path, NULL, err) : strdup(path)) == NULL) {
		if (!hub_is_spec(path))
			util_err(err, "%s: out of memory", path);
		free(md);
		return NULL;
	}
	if (stat(md->path, &sb) != 0) {
		util_err(err, "%s: %s", md->path, strerror(errno));
		model_close_text(md);
		return NULL;
	}
	if (S_ISREG(sb.st_mode) && (fp = fopen(md->path, "rb")) != NULL) {
		int gguf = fread(magic, 1, 4, fp) == 4 && memcmp(magic, "GGUF", 4) == 0;

		fclose(fp);
		if (gguf && model_gguf_open(md, md->path, err) != 0) {
			model_close_text(md);
			return NULL;
		}
	}
	return md;
}

void
model_close_text(struct model *md)
{
	if (md == NULL)
		return;
	model_gguf_close(md);
	free(md->path);
	free(md);
}

const char *
model_path(const struct model *md)
{
	return md->path;
}

const char *
model_draft_path(const struct model *md)
{
	return model_last(md)->draft_path;	/* a split's: its last stage drafts */
}

/* dir/name for an HF source (path is the directory or a file in it) */
static void
beside(const struct model *md, const char *name, char *buf, size_t len)
{
	struct stat sb;
	const char *slash;

	if (stat(md->path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		snprintf(buf, len, "%s/%s", md->path, name);
		return;
	}
	if ((slash = strrchr(md->path, '/')) == NULL)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "%.*s/%s", (int)(slash - md->path), md->path, name);
}

/* 1 when the source has no tokenizer at all: a GGUF without
 * tokenizer.ggml.model and tokenizer.ggml.tokens, an HF checkpoint
 * without tokenizer.json and tokenizer.model */
static int
no_tokenizer(const struct model *md)
{
	char path[4096];
	struct stat sb;

	if (md->gg != NULL)
		return gguf_find_key(md->gg, "tokenizer.ggml.model") < 0 &&
		    gguf_find_key(md->gg, "tokenizer.ggml.tokens") < 0;
	beside(md, "tokenizer.json", path, sizeof path);
	if (stat(path, &sb) == 0 || errno != ENOENT)
		return 0;
	beside(md, "tokenizer.model", path, sizeof path);
	return stat(path, &sb) != 0 && errno == ENOENT;
}

struct tokenizer *
model_tokenizer(struct model *md, char *err)
{
	char path[4096];

	err[0] = '\0';
	if (no_tokenizer(md))
		return NULL;
	if (md->gg != NULL)
		return tokenizer_from_gguf(md->gg, err);
	beside(md, "tokenizer.json", path, sizeof path);
	return tokenizer_from_json(path, err);
}

/* tokenizer_config.json's chat_template: a string, or [{name, template}] */
static char *
config_template(const char *path, char *err)
{
	char *text, *out = NULL;
	size_t len;
	struct json *j;
	const struct json *t;

	err[0] = '\0';
	if ((text = util_read_file(path, &len, err)) == NULL) {
		err[0] = '\0';		/* no file: no template */
		return NULL;
	}
	j = json_parse(text, len, err);
	free(text);
	if (j == NULL)
		return NULL;
	t = json_get(j, "chat_template");
	if (t != NULL && t->type == JSON_ARRAY) {
		const struct json *pick = NULL;

		for (size_t i = 0; i < t->n; i++) {
			const char *name = json_get_str(json_at(t, i), "name");

			if (pick == NULL || (name != NULL && strcmp(name, "default") == 0))
				pick = json_at(t, i);
		}
		t = pick != NULL ? json_get(pick, "template") : NULL;
	}
	if (t != NULL && t->type == JSON_STRING && (out = strdup(t->str)) == NULL)
		util_err(err, "%s: out of memory", path);
	json_free(j);
	return out;
}

char *
model_chat_template(struct model *md, char *err)
{
	char path[4096], *text;
	size_t len;

	err[0] = '\0';
	if (md->gg != NULL) {
		int64_t k = gguf_find_key(md->gg, "tokenizer.chat_template");
		const char *s = k < 0 ? NULL : gguf_get_str(md->gg, k, &len);

		if (s == NULL)
			return NULL;
		if ((text = strndup(s, len)) == NULL)
			util_err(err, "%s: out of memory", md->path);
		return text;
	}
	beside(md, "chat_template.jinja", path, sizeof path);
	if ((text = util_read_file(path, &len, err)) != NULL)
		return text;
	beside(md, "tokenizer_config.json", path, sizeof path);
	return config_template(path, err);
}

static void
add_id(int32_t *ids, int *n, int max, int64_t id)
{
	if (id < 0 || id > INT32_MAX || *n == max)
		return;
	for (int i = 0; i < *n; i++)
		if (ids[i] == id)
			return;
	ids[(*n)++] = (int32_t)id;
}

/* generation_config.json's eos_token_id: a number or an array of them */
static void
config_eos(const char *path, int32_t *ids, int *n, int max)
{
	char err[UTIL_ERRLEN], *text;
	size_t len;
	struct json *j;
	const struct json *e;

	if ((text = util_read_file(path, &len, err)) == NULL)
		return;
	j = json_parse(text, len, err);
	free(text);
	e = j != NULL ? json_get(j, "eos_token_id") : NULL;
	if (e != NULL && e->type == JSON_NUMBER && e->is_int)
		add_id(ids, n, max, e->i);
	for (size_t i = 0; e != NULL && e->type == JSON_ARRAY && i < e->n; i++)
		if (e->items[i].type == JSON_NUMBER && e->items[i].is_int)
			add_id(ids, n, max, e->items[i].i);
	json_free(j);
}

int
model_stop_ids(struct model *md, int32_t *ids, int max)
{
	static const char *const keys[] = { "tokenizer.ggml.eos_token_id",
	    "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id" };
	char path[4096];
	int n = 0;

	if (md->gg == NULL) {
		beside(md, "generation_config.json", path, sizeof path);
		config_eos(path, ids, &n, max);
		return n;
	}
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		int64_t k = gguf_find_key(md->gg, keys[i]), v;

		if (k >= 0 && gguf_get_int(md->gg, k, &v) == 0)
			add_id(ids, &n, max, v);
	}
	return n;
}
