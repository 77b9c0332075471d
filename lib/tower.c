#include "tower.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "media.h"
#include "model.h"
#include "prompt.h"
#include "util.h"
#include "vision.h"

struct tower {
	struct backend *be;
	struct vision *v;
	char	*src;
	int	image_tokens;
	size_t	took;
	pthread_mutex_t mu;	/* one request's images at a time */
};

struct tower *
tower_open(const struct tower_config *c, char *err)
{
	struct tower *t = calloc(1, sizeof *t);
	char why[UTIL_ERRLEN];
	size_t f0 = 0, f1 = 0, total;
	int gpu;

	if (t == NULL || (t->src = strdup(c->src)) == NULL) {
		free(t);
		util_err(err, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&t->mu, NULL);
	t->image_tokens = c->image_tokens;
	if ((t->be = backend_open(c->device, c->threads, err)) == NULL)
		goto fail;
	/* the prompt products' kernels of the models' backends (checked there), as
	 * run-gen's tower on the model's backend runs them */
	if (backend_gemm_env(t->be, c->gemm, why) != 0 ||
	    backend_rows_env(t->be, c->rows, why) != 0) {
		util_err(err, "%s: %s", backend_name(t->be), why);
		goto fail;
	}
	gpu = !backend_host(t->be) && backend_mem_info(t->be, &f0, &total) == 0;
	if ((t->v = vision_open(t->src, t->be, err)) == NULL)
		goto fail;
	if (vision_reserve(t->v, t->image_tokens) != 0) {
		util_err(err, "%s: %s", t->src, vision_errmsg(t->v));
		goto fail;
	}
	if (t->image_tokens == 0)
		t->image_tokens = vision_hparams(t->v)->max_tokens;
	if (gpu && backend_mem_info(t->be, &f1, &total) == 0 && f0 > f1)
		t->took = f0 - f1;
	return t;
fail:
	tower_close(t);
	return NULL;
}

void
tower_close(struct tower *t)
{
	if (t == NULL)
		return;
	vision_close(t->v);
	backend_close(t->be);
	pthread_mutex_destroy(&t->mu);
	free(t->src), free(t);
}

struct vision *
tower_vision(const struct tower *t)
{
	return t->v;
}

const char *
tower_src(const struct tower *t)
{
	return t->src;
}

const char *
tower_device(const struct tower *t)
{
	return backend_name(t->be);
}

int
tower_host(const struct tower *t)
{
	return backend_host(t->be);
}

int
tower_image_tokens(const struct tower *t)
{
	return t->image_tokens;
}

size_t
tower_took(const struct tower *t)
{
	return t->took;
}

int
tower_fits(const struct tower *t, const char *name, struct model *m, const struct prompt *pr,
    struct vision_tokens *vt, char *err)
{
	const struct vision_hparams *hp = vision_hparams(t->v);
	char why[UTIL_ERRLEN];

	for (int s = 0; hp->bidir && s < model_stages(m); s++)
		if (!backend_attn_hi(model_stage_backend(m, s)))
			return util_err(err, "%s: the models' image rows see each other both ways, "
			    "which the attention of backend '%s' cannot do (the CPU's and CUDA's can)",
			    t->src, backend_name(model_stage_backend(m, s)));
	if (hp->n_embd_text != model_hparams(m)->n_embd)
		return util_err(err, "%s: a tower for a text width of %d, model '%s' has %d", t->src,
		    hp->n_embd_text, name, model_hparams(m)->n_embd);
	if (prompt_tokenizer(pr) == NULL || !prompt_is_chat(pr))
		return util_err(err, "model '%s' has no chat template", name);
	if (vision_tokens(prompt_tokenizer(pr), vt, why) != 0)
		return util_err(err, "model '%s': %s", name, why);
	return 0;
}

int
tower_prompt(struct tower *t, const struct media *md, const struct vision_tokens *vt,
    const int32_t *ids, size_t n, int32_t **out, size_t *n_out, struct vision_prompt *vp,
    char *err)
{
	int rc;

	pthread_mutex_lock(&t->mu);
	rc = backend_use(t->be) != 0 ? util_err(err, "%s", backend_errmsg(t->be)) :
	    media_prompt(md, t->v, vt, NULL, t->image_tokens, ids, n, out, n_out, vp, err);
	pthread_mutex_unlock(&t->mu);
	return rc;
}
