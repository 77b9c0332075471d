/*
 * kernel-check: the Gemma-4 vision tower on both backends.  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- the Gemma-4 vision tower on both backends -------------------------- */

/* 1 when path is a checkpoint directory whose config.json holds a tower
 * vision_open takes (vision_config_why: Step3p7's checkpoints have a
 * vision_config too, and vis_open would end the run on them). */
static int
vis_has_tower(const char *path)
{
	char f[4096], err[UTIL_ERRLEN];
	struct json *j;
	size_t n;
	char *text;
	int yes;

	snprintf(f, sizeof f, "%s/config.json", path);
	if ((text = util_read_file(f, &n, err)) == NULL)
		return 0;
	j = json_parse(text, n, err);
	free(text);
	yes = j != NULL && vision_config_why(j) == NULL;
	json_free(j);
	return yes;
}

static int
vis_namecmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The PNG and JPEG files of dir/images in name order (*n of them, malloc'd). */
static char **
vis_images(const char *dir, int *n)
{
	enum { MAXIMG = 64 };
	char d[4096], **v = xmalloc(MAXIMG * sizeof *v);
	struct dirent *e;
	DIR *dp;

	*n = 0;
	snprintf(d, sizeof d, "%s/images", dir);
	if ((dp = opendir(d)) == NULL)
		return v;
	while ((e = readdir(dp)) != NULL && *n < MAXIMG) {
		const char *x = strrchr(e->d_name, '.');
		if (x == NULL || (strcmp(x, ".png") && strcmp(x, ".jpg") && strcmp(x, ".jpeg")))
			continue;
		v[*n] = xmalloc(strlen(d) + strlen(e->d_name) + 2);
		sprintf(v[(*n)++], "%s/%s", d, e->d_name);
	}
	closedir(dp);
	qsort(v, *n, sizeof *v, vis_namecmp);
	return v;
}

/* The tower at path opened on be. */
static struct vision *
vis_open(struct backend *be, const char *path)
{
	char err[UTIL_ERRLEN];
	struct vision *v = vision_open(path, be, err);

	if (v == NULL)
		die(1, "%s: %s", backend_name(be), err);
	return v;
}

/*
 * Tower v (on the backend named who) run on img: its soft tokens (stages <
 * 0: vision_encode, [n_tok][n_embd_text]) or its hidden rows after stages
 * (vision_hidden, [gw gh][n_embd]); host memory, malloc'd.
 */
static float *
vis_run(struct vision *v, const char *who, const struct vision_image *img, int stages)
{
	const struct vision_hparams *hp = vision_hparams(v);
	float *out = xmalloc((stages < 0 ? (size_t)img->n_tok * hp->n_embd_text :
	    (size_t)img->gw * img->gh * hp->n_embd) * sizeof *out);

	if ((stages < 0 ? vision_encode(v, img, out) : vision_hidden(v, img, stages, out)) != 0)
		die(1, "%s: %s", who, vision_errmsg(v));
	return out;
}

/*
 * The floor of the vision lines' tolerance for a tower with half products
 * (vision_hparams.half): a float-order difference upstream flips the
 * rounding of an activation to BF16 (F16) now and then, a move of up to
 * 2^-9 (2^-12) of it, which later layers carry on.  The CPU's own two
 * orders show it (g4-vision's tower in BF16: cpu noise up to 2.7e-3 on its
 * images, 5.8e-8 where no rounding flipped; F16 3.3e-4 to 5.9e-4; F32
 * 4.5e-7 to 9.5e-7; an AVX2 CPU against cpu:scalar), but the GPU's
 * orders are others, so three times that noise may fall short; a wrong op
 * still moves a soft token (of size 1 to 2) by its own size.
 */
#define VIS_HALF_TOL 1e-2

/* The vision lines' tolerance on a tower of hp with CPU noise noise. */
static double
vis_tol(const struct vision_hparams *hp, double noise)
{
	return fmax(hp->half ? VIS_HALF_TOL : 1e-3, 3 * noise);
}

/*
 * Each value's scale in rows of w: 1 + the largest |value| of its row.  A
 * flipped rounding upstream moves a hidden row by a share of the row's
 * size, its small values as much as its large ones.
 */
static void
vis_rowmag(const float *c, int64_t rows, int w, double *mag)
{
	for (int64_t r = 0; r < rows; r++) {
		double big = 0;

		for (int i = 0; i < w; i++)
			big = fmax(big, fabs(c[r * w + i]));
		for (int i = 0; i < w; i++)
			mag[r * w + i] = 1.0 + big;
	}
}

/*
 * Where the GPU's tower leaves the CPU's, stage by stage, on img: its
 * hidden rows after the patch embedding, then after each layer's
 * attention and feed-forward block, against the CPU's, each within 3 x
 * the CPU's own noise there (cpu:scalar sc), at least 1e-3 of 1 + its
 * size; a tower with half products, VIS_HALF_TOL of 1 + its row's
 * largest value (vis_rowmag: session 24's H100 saw 0.0153 on a value
 * under 0.53 of g4-vision's BF16 layer 1, with no CPU order flipping it).
 */
static void
vis_stages(struct kc *k, struct vision *vc, struct vision *vs, struct vision *vg,
    const struct vision_image *img)
{
	const struct vision_hparams *hp = vision_hparams(vc);
	int64_t n = (int64_t)img->gw * img->gh * hp->n_embd;
	double *mag = hp->half ? xmalloc((size_t)n * sizeof *mag) : NULL;

	for (int s = 0; s <= 2 * hp->n_layer; s++) {
		float *c = vis_run(vc, "cpu", img, s), *q = vis_run(vs, "cpu:scalar", img, s);
		float *g = vis_run(vg, "gpu", img, s);
		double noise = 0, ab = 0;
		char shape[96];

		noise_add(c, q, (int)n, &noise, &ab);
		if (hp->half)
			vis_rowmag(c, (int64_t)img->gw * img->gh, hp->n_embd, mag);
		if (s == 0)
			snprintf(shape, sizeof shape, "patch embedding, %lld values (cpu noise %.2g)",
			    (long long)n, noise);
		else
			snprintf(shape, sizeof shape, "layer %d %s, %lld values (cpu noise %.2g)",
			    (s - 1) / 2, s % 2 ? "attention" : "feed-forward", (long long)n, noise);
		becmp(k, "vision hidden", shape, g, c, hp->half ? mag : NULL, n, vis_tol(hp, noise));
		free(c), free(q), free(g);
	}
	free(mag);
}

/* An image of gw x gh patches of random pixels (no images folder). */
static void
vis_random(struct kc *k, const struct vision_hparams *hp, int gw, int gh,
    struct vision_image *img)
{
	size_t n = (size_t)gw * gh * hp->patch * hp->patch * 3;

	memset(img, 0, sizeof *img);
	img->gw = gw, img->gh = gh, img->rw = img->w = gw * hp->patch;
	img->rh = img->h = gh * hp->patch;
	img->n_tok = gw * gh / (hp->pool * hp->pool);
	img->px = frand(k, (int64_t)n, 0.0f, 1.0f);
}

/* The mmproj GGUFs of dir (mmproj-*.gguf) in name order (*n of them, malloc'd). */
static char **
vis_mmprojs(const char *dir, int *n)
{
	enum { MAXT = 16 };
	char **v = xmalloc(MAXT * sizeof *v);
	struct dirent *e;
	DIR *dp;

	*n = 0;
	if ((dp = opendir(dir)) == NULL)
		return v;
	while ((e = readdir(dp)) != NULL && *n < MAXT) {
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, "mmproj-", 7) != 0 || l < 12 ||
		    strcmp(e->d_name + l - 5, ".gguf") != 0)
			continue;
		v[*n] = xmalloc(strlen(dir) + l + 2);
		sprintf(v[(*n)++], "%s/%s", dir, e->d_name);
	}
	closedir(dp);
	qsort(v, *n, sizeof *v, vis_namecmp);
	return v;
}

/*
 * One tower (tower: the checkpoint directory, or an mmproj GGUF of it,
 * named by who in the lines) on both backends over the images files[nimg]
 * (prepared for a budget of max_tokens soft tokens; 0: the tower's own),
 * or one random image; be_vision says what is compared and how.
 */
static void
vis_tower(struct kc *k, struct bpair *p, struct backend *sc, const char *tower,
    const char *who, char **files, int nimg, int max_tokens)
{
	struct vision *v = vis_open(p->c, tower), *vs = vis_open(sc, tower);
	struct vision *vg = vis_open(p->g, tower);
	const struct vision_hparams *hp = vision_hparams(v);
	char err[UTIL_ERRLEN], shape[192];

	for (int i = 0; i < (nimg > 0 ? nimg : 1); i++) {
		struct vision_image img;
		const char *name = nimg > 0 ? strrchr(files[i], '/') + 1 : "random";
		int64_t n;
		double noise = 0, ab = 0;

		if (nimg == 0)
			vis_random(k, hp, 6 * hp->pool, 9 * hp->pool, &img);
		else {
			size_t len;
			char *buf = util_read_file(files[i], &len, err);
			if (buf == NULL ||
			    vision_prepare(v, buf, len, NULL, max_tokens, &img, err) != 0)
				die(1, "%s: %s", files[i], err);
			free(buf);
		}
		n = (int64_t)img.n_tok * hp->n_embd_text;
		float *c = vis_run(v, "cpu", &img, -1), *s = vis_run(vs, "cpu:scalar", &img, -1);
		float *g = vis_run(vg, "gpu", &img, -1);
		noise_add(c, s, (int)n, &noise, &ab);
		snprintf(shape, sizeof shape, "%s%s%s: %dx%d patches, %d x %d (cpu noise %.2g)", who,
		    *who ? " " : "", name, img.gw, img.gh, img.n_tok, hp->n_embd_text, noise);
		becmp(k, "vision soft tokens", shape, g, c, NULL, n, vis_tol(hp, noise));
		if (i == 0) {	/* where the two part, if they do; a backend that ran nothing else */
			struct backend *fg = backend_open(p->gname, 0, err);
			struct vision *vf;

			vis_stages(k, v, vs, vg, &img);
			if (fg == NULL)
				die(1, "%s", err);
			bchk(fg, backend_gemm_set(fg, BACKEND_GEMM_INT8));
			vf = vis_open(fg, tower);
			free(g);
			g = vis_run(vf, "gpu (fresh)", &img, -1);
			vision_close(vf);
			becmp(k, "vision soft tokens fresh", shape, g, c, NULL, n, vis_tol(hp, noise));
			backend_close(fg);
			/* with the budget's buffers held and their warm-up run, as serve's tower */
			if (vision_reserve(vg, max_tokens) != 0)
				die(1, "gpu: %s", vision_errmsg(vg));
			free(g);
			g = vis_run(vg, "gpu (reserved)", &img, -1);
			becmp(k, "vision soft tokens reserved", shape, g, c, NULL, n,
			    vis_tol(hp, noise));
		}
		free(c), free(s), free(g);
		vision_image_free(&img);
	}
	vision_close(v), vision_close(vs), vision_close(vg);
}

/*
 * A checkpoint directory with a Gemma-4 vision tower (config.json's
 * vision_config; others are skipped): the tower and its projector on the
 * GPU backend against the CPU's, the soft tokens of each image of its
 * images/ folder (t/data/gemma4/g4-vision's: every PNG and JPEG, in name
 * order, prepared once on the host as run-gen prepares them), or of one
 * random image of 6 x 9 pooled blocks without one; then the same for each
 * mmproj-*.gguf beside its weights (g4-vision's: llama.cpp's F32 mmproj and
 * its BF16 and F16 renditions), the images prepared for the directory's
 * budget, the lines named by the file.  The tower's products are
 * backend_matmul_half's: BF16 and F16 weights on activations rounded to
 * their type on both backends (the GPU's on tensor cores), F32 weights on
 * fp32 operands (cuBLAS without TF32), quantized ones the int8 prompt
 * kind's (BACKEND_GEMM_INT8: the CPU's numerics), so each product sees
 * the same operands on both, and the backends differ by float order, and
 * in a half tower by the roundings that order flips.  The tolerance is the
 * CPU's own noise as be_model takes it: the CPU backend against its
 * portable path (cpu:scalar: other sums, the same op contract), relative
 * to 1 + |soft token|, times 3; at least 1e-3, for a CPU whose two paths
 * coincide (no AVX2) and for the GPU's own orders in attention (split-K)
 * and the norms, whose drift a tower of 27 layers compounds; at least
 * VIS_HALF_TOL for a tower with half products.  A wrong op moves a soft
 * token by its own size, far past it.  Each tower's first image runs a
 * second time on a GPU backend opened for it alone ("fresh"): the tower's
 * result must not depend on what ran before it on the backend (the model
 * checks, here), and a third time on the first GPU tower after
 * vision_reserve ("reserved": the budget's buffers held and one encode of
 * its largest grid run in them, as serve's tower boots); and its hidden
 * rows are compared stage by stage ("vision
 * hidden": after the patch embedding, each layer's attention and
 * feed-forward block), so that a failure names where the backends part.
 */
void
be_vision(struct kc *k, struct bpair *p, const char *path)
{
	struct backend *sc;
	char err[UTIL_ERRLEN], **files, **mm;
	int nimg, nmm, budget;
	struct vision *v;

	if (!vis_has_tower(path))
		return;
	if ((sc = backend_open("cpu:scalar", 0, err)) == NULL)
		die(1, "%s", err);
	bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_INT8));
	files = vis_images(path, &nimg);
	mm = vis_mmprojs(path, &nmm);
	v = vis_open(p->c, path);
	budget = vision_hparams(v)->max_tokens;
	vision_close(v);
	vis_tower(k, p, sc, path, "", files, nimg, 0);
	for (int i = 0; i < nmm; i++)
		vis_tower(k, p, sc, mm[i], strrchr(mm[i], '/') + 1, files, nimg, budget);
	bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_DEFAULT));
	for (int i = 0; i < nimg; i++)
		free(files[i]);
	for (int i = 0; i < nmm; i++)
		free(mm[i]);
	free(files), free(mm);
	backend_close(sc);
}

/*
 * A fused form's output on three runs: the CPU's (cd), the GPU's fused
 * (gd) and the GPU's plain ops (ud): GPU against CPU within tol (of mag,
 * or 1 + |ref|), and fused against plain bit for bit (the name + " =plain"),
 * each with its own broken arm.
 */
static void
fz_cmp(struct kc *k, struct bpair *p, const char *name, const char *shape, const float *cd,
    const float *gd, const float *ud, size_t n, const double *mag, double tol)
{
	float *c = bget(p->c, cd, n), *g = bget(p->g, gd, n), *u = bget(p->g, ud, n);
	char nm[64];

	becmp(k, name, shape, g, c, mag, (int64_t)n, tol);
	free(g);
	g = bget(p->g, gd, n);
	snprintf(nm, sizeof nm, "%s =plain", name);
	bsame(k, nm, shape, g, u, (int64_t)n);
	free(c), free(g), free(u);
}

/* Inputs i of o back to their host values on both backends (and into u on the GPU). */
static void
fz_reset(struct bpair *p, struct bop *o, int i, float *u)
{
	bchk(p->c, backend_write(p->c, o->c[i], o->h[i], o->n[i]));
	bchk(p->g, backend_write(p->g, o->g[i], o->h[i], o->n[i]));
	bchk(p->g, backend_write(p->g, u, o->h[i], o->n[i]));
}

/* sum |w x| of a product whose input (m rows of ld) is on the CPU backend at cx. */
static double *
fz_mag(struct bpair *p, const struct bw *b, const float *cx, int ld, int m, float scale)
{
	float *x = bget(p->c, cx, (size_t)m * ld);
	double *mag = bmag(b, x, ld, m, scale);

	free(x);
	return mag;
}

/*
 * The fused forms (backend_add_rmsnorm_matmul, ffn, rmsnorm_gated_matmul,
 * mul_sigmoid_matmul, geglu_matmul, mlp, norm_residual_matmul) on m rows of nh heads of hd,
 * products of nout rows of type t (scale s on the first weight): the GPU
 * against the CPU with the tolerances of the ops they fuse (what they
 * write back to their input too), and against the GPU's own plain ops
 * bit for bit.
 */
void
be_fuse(struct kc *k, struct bpair *p, int t, int m, int nh, int hd, int nout, float s)
{
	int n = nh * hd;
	size_t sz[] = { (size_t)m * n, (size_t)m * n, (size_t)n, (size_t)hd, (size_t)m * n,
	    (size_t)m * nh * 2 * hd, (size_t)m * nout, (size_t)m * nout };
	float lo[] = { -2, -1, 0.5f, 0.5f, -3, -4, -3, -2 }, hi[] = { 2, 1, 1.5f, 1.5f, 3, 4, 3, 2 };
	struct bw wa, wb, wd;
	struct bop o;
	char shape[64];
	size_t ny = (size_t)m * (nout > n ? nout : n);
	float *cy[2], *gy[2], *uy[2], *ux = bput(p->g, NULL, ny), *ct = bput(p->c, NULL, (size_t)m * n);
	double *mag;

	for (int i = 0; i < 2; i++) {
		cy[i] = bput(p->c, NULL, ny), gy[i] = bput(p->g, NULL, ny);
		uy[i] = bput(p->g, NULL, ny);
	}
	bw_new(k, p, &wa, t, nout, n, s);
	bw_new(k, p, &wb, t, nout, n, 1.0f);
	bw_new(k, p, &wd, t, n, nout, s);
	bop_new(k, p, &o, 8, sz, lo, hi);
	snprintf(shape, sizeof shape, "%s m=%d %dx%d out=%d", quant_name(t), m, nh, hd, nout);

	/* x += t; norm; two products */
	const struct backend_weight *Wc[2] = { &wa.c, &wb.c }, *Wg[2] = { &wa.g, &wb.g };
	bchk(p->g, backend_write(p->g, ux, o.h[0], o.n[0]));
	BOTH(p, backend_add_rmsnorm_matmul(p->c, o.c[0], o.c[1], m, n, o.c[2], 1e-6f, 2, Wc, cy),
	    backend_add_rmsnorm_matmul(p->g, o.g[0], o.g[1], m, n, o.g[2], 1e-6f, 2, Wg, gy));
	bchk(p->g, backend_add(p->g, ux, o.g[1], o.n[0]));
	bchk(p->g, backend_rmsnorm_matmul(p->g, ux, m, n, o.g[2], 1e-6f, 2, Wg, uy));
	bchk(p->c, backend_rmsnorm(p->c, o.c[0], n, o.c[2], ct, n, m, n, 1e-6f));
	fz_cmp(k, p, "be addnorm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-6);
	mag = fz_mag(p, &wa, ct, n, m, s);
	fz_cmp(k, p, "be addnorm_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag,
	    2e-2);
	free(mag);
	mag = fz_mag(p, &wb, ct, n, m, 1.0f);
	fz_cmp(k, p, "be addnorm_mm 2", shape, cy[1], gy[1], uy[1], (size_t)m * nout, mag,
	    2e-2);
	free(mag);

	/* the FFN: x += t, norm, f = silu(gate) * up (f: o[6], scratch o[7]), down into y */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_ffn(p->c, o.c[0], o.c[1], m, n, o.c[2], 1e-6f, &wa.c, &wb.c, &wd.c, o.c[6],
	    o.c[7], cy[0]), backend_ffn(p->g, o.g[0], o.g[1], m, n, o.g[2], 1e-6f, &wa.g, &wb.g,
	    &wd.g, o.g[6], o.g[7], gy[0]));
	bchk(p->g, backend_add(p->g, ux, o.g[1], o.n[0]));
	bchk(p->g, backend_rmsnorm(p->g, ux, n, o.g[2], uy[0], n, m, n, 1e-6f));
	bchk(p->g, backend_matmul_swiglu(p->g, &wa.g, &wb.g, uy[0], m, uy[1]));
	bchk(p->g, backend_matmul(p->g, &wd.g, uy[1], nout, uy[0], n, m));
	bchk(p->c, backend_rmsnorm(p->c, o.c[0], n, o.c[2], ct, n, m, n, 1e-6f));
	fz_cmp(k, p, "be ffn x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-6);
	{
		float *xn = bget(p->c, ct, (size_t)m * n);
		double *mn = xmalloc((size_t)m * nout * 8), *my = xmalloc((size_t)m * nout * 8);
		fused_mags(&wa, &wb, xn, o.h[2], m, n, nout, mn, my);
		fz_cmp(k, p, "be ffn f", shape, o.c[6], o.g[6], uy[1], (size_t)m * nout, my, 2e-2);
		free(xn), free(mn), free(my);
	}
	mag = fz_mag(p, &wd, o.c[6], nout, m, s);
	fz_cmp(k, p, "be ffn", shape, cy[0], gy[0], uy[0], (size_t)m * n, mag, 2e-2);
	free(mag);

	/* the gated norm per head; the out product */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_rmsnorm_gated_matmul(p->c, o.c[0], o.c[4], o.c[3], m, nh, hd, 1e-6f, &wa.c,
	    cy[0]), backend_rmsnorm_gated_matmul(p->g, o.g[0], o.g[4], o.g[3], m, nh, hd, 1e-6f,
	    &wa.g, gy[0]));
	bchk(p->g, backend_rmsnorm_gated(p->g, ux, o.g[4], o.g[3], ux, m * nh, hd, 1e-6f));
	bchk(p->g, backend_matmul(p->g, &wa.g, ux, n, uy[0], nout, m));
	fz_cmp(k, p, "be gnorm_mm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-5);
	mag = fz_mag(p, &wa, o.c[0], n, m, s);
	fz_cmp(k, p, "be gnorm_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag,
	    2e-2);
	free(mag);

	/* x *= sigmoid(gate), the gate the second half of each head's 2 hd; the o product */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_mul_sigmoid_matmul(p->c, o.c[0], o.c[5] + hd, 2 * hd, m, nh, hd, &wa.c,
	    cy[0]), backend_mul_sigmoid_matmul(p->g, o.g[0], o.g[5] + hd, 2 * hd, m, nh, hd, &wa.g,
	    gy[0]));
	bchk(p->g, backend_mul_sigmoid(p->g, ux, hd, o.g[5] + hd, 2 * hd, m * nh, hd));
	bchk(p->g, backend_matmul(p->g, &wa.g, ux, n, uy[0], nout, m));
	fz_cmp(k, p, "be sigmoid_mm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-6);
	mag = fz_mag(p, &wa, o.c[0], n, m, s);
	fz_cmp(k, p, "be sigmoid_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag, 2e-2);
	free(mag);

	/* x = gelu_tanh(x) * u (Gemma-4's MLP, u: o[1]); the down product */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_geglu_matmul(p->c, o.c[0], o.c[1], m, &wa.c, cy[0]),
	    backend_geglu_matmul(p->g, o.g[0], o.g[1], m, &wa.g, gy[0]));
	bchk(p->g, backend_geglu(p->g, ux, n, o.g[1], n, ux, n, m, n));
	bchk(p->g, backend_matmul(p->g, &wa.g, ux, n, uy[0], nout, m));
	fz_cmp(k, p, "be geglu_mm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-5);
	mag = fz_mag(p, &wa, o.c[0], n, m, s);
	fz_cmp(k, p, "be geglu_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag, 2e-2);
	free(mag);

	/* the MLP on x as it is (a shared expert's, step35's): f = silu(gate) * up, with a limit
	 * too (min(silu(g), L) * clamp(u, -L, L)); f o[6], scratch o[7], down into y; the plain
	 * ops' up product in ux */
	for (int li = 0; li < 2; li++) {
		float lim = li ? 0.75f : 0.0f;
		double *mn = xmalloc((size_t)m * nout * 8), *my = xmalloc((size_t)m * nout * 8);
		fz_reset(p, &o, 0, ux);
		BOTH(p, backend_mlp(p->c, &wa.c, &wb.c, &wd.c, o.c[0], m, lim, o.c[6], o.c[7], cy[0]),
		    backend_mlp(p->g, &wa.g, &wb.g, &wd.g, o.g[0], m, lim, o.g[6], o.g[7], gy[0]));
		if (lim > 0) {
			bchk(p->g, backend_matmul(p->g, &wa.g, o.g[0], n, uy[1], nout, m));
			bchk(p->g, backend_matmul(p->g, &wb.g, o.g[0], n, ux, nout, m));
			bchk(p->g, backend_swiglu_limit(p->g, uy[1], ux, uy[1], (size_t)m * nout, lim));
		} else
			bchk(p->g, backend_matmul_swiglu(p->g, &wa.g, &wb.g, o.g[0], m, uy[1]));
		bchk(p->g, backend_matmul(p->g, &wd.g, uy[1], nout, uy[0], n, m));
		fused_mags(&wa, &wb, o.h[0], o.h[2], m, n, nout, mn, my);
		fz_cmp(k, p, li ? "be mlp lim f" : "be mlp f", shape, o.c[6], o.g[6], uy[1],
		    (size_t)m * nout, my, 2e-2);
		free(mn), free(my);
		mag = fz_mag(p, &wd, o.c[6], nout, m, s);
		fz_cmp(k, p, li ? "be mlp lim" : "be mlp", shape, cy[0], gy[0], uy[0], (size_t)m * n,
		    mag, 2e-2);
		free(mag);
	}

	/* x = (x + rmsnorm(a) wa) s (Gemma-4's post-attention norm and residual add), norm,
	 * two products: a o[1] (spent: last), wa o[4]'s first row, s 1 and a layer scalar's */
	for (int si = 0; si < 2; si++) {
		float sl = si ? 0.75f : 1.0f;
		fz_reset(p, &o, 0, ux);
		fz_reset(p, &o, 1, uy[1]);
		BOTH(p, backend_norm_residual_matmul(p->c, o.c[0], o.c[1], o.c[4], sl, m, n, o.c[2],
		    1e-6f, 2, Wc, cy), backend_norm_residual_matmul(p->g, o.g[0], o.g[1], o.g[4], sl, m,
		    n, o.g[2], 1e-6f, 2, Wg, gy));
		bchk(p->g, backend_norm_residual(p->g, ux, uy[1], o.g[4], NULL, NULL, NULL, 1e-6f, sl,
		    m, n));
		bchk(p->g, backend_rmsnorm_matmul(p->g, ux, m, n, o.g[2], 1e-6f, 2, Wg, uy));
		bchk(p->c, backend_rmsnorm(p->c, o.c[0], n, o.c[2], ct, n, m, n, 1e-6f));
		fz_cmp(k, p, si ? "be normres x s" : "be normres x", shape, o.c[0], o.g[0], ux, o.n[0],
		    NULL, 1e-5);
		mag = fz_mag(p, &wa, ct, n, m, s);
		fz_cmp(k, p, si ? "be normres_mm s" : "be normres_mm", shape, cy[0], gy[0], uy[0],
		    (size_t)m * nout, mag, 2e-2);
		free(mag);
		mag = fz_mag(p, &wb, ct, n, m, 1.0f);
		fz_cmp(k, p, si ? "be normres_mm 2 s" : "be normres_mm 2", shape, cy[1], gy[1], uy[1],
		    (size_t)m * nout, mag, 2e-2);
		free(mag);
	}

	bop_free(p, &o);
	bw_free(p, &wa), bw_free(p, &wb), bw_free(p, &wd);
	for (int i = 0; i < 2; i++) {
		backend_mfree(p->c, cy[i]), backend_mfree(p->g, gy[i]);
		backend_mfree(p->g, uy[i]);
	}
	backend_mfree(p->g, ux), backend_mfree(p->c, ct);
}

/*
 * Products of one normed x in one launch (GDN's four, q/k/v, gate/up):
 * backend_rmsnorm_matmul of four weights of unlike row counts equals four
 * calls of one weight bit for bit, on the GPU.
 */
void
be_set(struct kc *k, struct bpair *p, int t, int m, int n)
{
	static const int64_t rows[4] = { 320, 40, 8, 257 };
	struct bw b[4];
	const struct backend_weight *W[4];
	float *x = frand(k, (int64_t)m * n, -2, 2), *nw = frand(k, n, 0.5f, 1.5f);
	float *gx = bput(p->g, x, (size_t)m * n), *gw = bput(p->g, nw, (size_t)n);
	float *ys[4], *y1[4];
	char shape[64], name[64];

	for (int i = 0; i < 4; i++) {
		bw_new(k, p, &b[i], t, rows[i], n, i == 1 ? 0.5f : 1.0f);
		W[i] = &b[i].g;
		ys[i] = bput(p->g, NULL, (size_t)m * rows[i]);
		y1[i] = bput(p->g, NULL, (size_t)m * rows[i]);
	}
	bchk(p->g, backend_rmsnorm_matmul(p->g, gx, m, n, gw, 1e-6f, 4, W, ys));
	for (int i = 0; i < 4; i++)
		bchk(p->g, backend_rmsnorm_matmul(p->g, gx, m, n, gw, 1e-6f, 1, &W[i], &y1[i]));
	for (int i = 0; i < 4; i++) {
		float *a = bget(p->g, ys[i], (size_t)m * rows[i]), *c = bget(p->g, y1[i],
		    (size_t)m * rows[i]);
		snprintf(name, sizeof name, "be matmul set %s", quant_name(t));
		snprintf(shape, sizeof shape, "m=%d w%d of 4: %lldx%d", m, i, (long long)rows[i], n);
		bsame(k, name, shape, a, c, (int64_t)m * rows[i]);
		free(a), free(c);
		bw_free(p, &b[i]);
		backend_mfree(p->g, ys[i]), backend_mfree(p->g, y1[i]);
	}
	free(x), free(nw);
	backend_mfree(p->g, gx), backend_mfree(p->g, gw);
}

#endif	/* MEMRA_HAVE_CUDA */
