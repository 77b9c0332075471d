/*
 * tower: a server's Gemma-4 vision tower (lib/vision) on a backend of its
 * own, shared by the requests' threads: opened and made ready for its
 * largest image before anything else takes its device's memory, the models
 * it feeds checked against it, and a request's images through it one
 * request at a time (the backend is used by one thread at a time).
 */
#ifndef MEMRA_TOWER_H
#define MEMRA_TOWER_H

#include <stddef.h>
#include <stdint.h>

struct media;
struct model;
struct prompt;
struct vision;
struct vision_prompt;
struct vision_tokens;

struct tower_config {
	const char *src;	/* an mmproj GGUF or an HF checkpoint directory */
	const char *device;	/* cpu or cuda[:N] (backend_open's) */
	int	threads;	/* backend_open's */
	int	image_tokens;	/* an image's soft tokens (0: the tower's own budget) */
	const char *gemm;	/* MEMRA_CUDA_GEMM's value or NULL (backend_gemm_env) */
	const char *rows;	/* MEMRA_CUDA_STEP_ROWS's value or NULL (backend_rows_env) */
};

struct tower;

/*
 * The tower of c on a backend of its own, its working memory for the
 * largest image of its budget held (vision_reserve).  NULL with the reason
 * in err (UTIL_ERRLEN): the device, a MEMRA_CUDA_* value, the tower, no
 * memory.  tower_close frees (NULL is a no-op).
 */
struct tower *tower_open(const struct tower_config *c, char *err);
void	tower_close(struct tower *);

struct vision *tower_vision(const struct tower *);
const char *tower_src(const struct tower *);
const char *tower_device(const struct tower *);	/* its backend's name */
int	tower_host(const struct tower *);	/* 1: on the CPU */
int	tower_image_tokens(const struct tower *);	/* an image's budget */

/* What the tower took of its device's free memory (weights and working
 * memory), in bytes; 0 on the CPU (or where the device cannot say). */
size_t	tower_took(const struct tower *);

/*
 * Whether model m (named name, prompt pr) can take the tower's images:
 * its text width the tower's, a chat template, the image markers in its
 * vocabulary (into *vt), and, where the tower's image rows see each other
 * both ways, a backend whose attention does that.  0, or -1 with the
 * reason in err.
 */
int	tower_fits(const struct tower *, const char *name, struct model *m,
	    const struct prompt *pr, struct vision_tokens *vt, char *err);

/*
 * media_prompt through the tower, one caller at a time: md's images into
 * the prompt ids[n] (markers vt) as *out[*n_out] with their soft tokens in
 * vp.  0, or -1 with err.
 */
int	tower_prompt(struct tower *, const struct media *md, const struct vision_tokens *vt,
	    const int32_t *ids, size_t n, int32_t **out, size_t *n_out, struct vision_prompt *vp,
	    char *err);

#endif
