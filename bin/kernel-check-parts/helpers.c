/*
 * kernel-check: small helpers and random quantized weights.  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- small helpers ----------------------------------------------------- */

uint64_t
rnd(struct kc *k)	/* xorshift64* */
{
	k->rng ^= k->rng >> 12;
	k->rng ^= k->rng << 25;
	k->rng ^= k->rng >> 27;
	return k->rng * 0x2545F4914F6CDD1DULL;
}

static float
unif(struct kc *k, float lo, float hi)	/* [lo, hi) */
{
	return lo + (hi - lo) * (float)((rnd(k) >> 40) * 0x1p-24);
}

void
gchk(struct kc *k, int rc)
{
	if (rc != 0)
		die(1, "gpu: %s", gpu_errmsg(k->g));
}

void *
dput(struct kc *k, const void *h, size_t n)	/* device copy of n host bytes */
{
	void *d = gpu_alloc(k->g, n);

	if (d == NULL)
		die(1, "gpu: %s", gpu_errmsg(k->g));
	if (h != NULL)
		gchk(k, gpu_upload(k->g, d, h, n));
	return d;
}

void
dget(struct kc *k, void *h, const void *d, size_t n)
{
	gchk(k, gpu_download(k->g, h, d, n));
	gchk(k, gpu_sync(k->g));
}

float *
frand(struct kc *k, int64_t n, float lo, float hi)
{
	float *v = xmalloc((size_t)n * sizeof *v);

	for (int64_t i = 0; i < n; i++)
		v[i] = unif(k, lo, hi);
	return v;
}

int
report(struct kc *k, const char *name, const char *shape, double maxdiff, int ok)
{
	printf("%-22s %-32s maxdiff=%-10.3g %s\n", name, shape, maxdiff, ok ? "OK" : "FAIL");
	fflush(stdout);
	k->nchk++;
	if (!ok)
		k->nfail++;
	return ok;
}

/*
 * Compare got with ref: OK when every |got - ref| <= tol * mag, mag[i]
 * (or 1 + |ref| when mag is NULL).  NaN fails.
 */
int
close_to(struct kc *k, const char *name, const char *shape, const float *got,
    const double *ref, const double *mag, int64_t n, double tol)
{
	double maxd = 0;
	int ok = 1;

	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		double m = mag ? mag[i] : 1.0 + fabs(ref[i]);
		if (!(d <= tol * m))
			ok = 0;
		if (d > maxd || d != d)
			maxd = d;
	}
	return report(k, name, shape, maxd, ok);
}

/* same_bits, OK only when also cond (e.g. the kernels meant to run ran). */
int
same_bits_if(struct kc *k, const char *name, const char *shape, const float *a,
    const float *b, int64_t n, int cond)
{
	double maxd = 0;
	int ok = memcmp(a, b, (size_t)n * sizeof *a) == 0 && cond;

	for (int64_t i = 0; i < n; i++)
		if (fabs((double)a[i] - b[i]) > maxd)
			maxd = fabs((double)a[i] - b[i]);
	return report(k, name, shape, maxd, ok);
}

int
same_bits(struct kc *k, const char *name, const char *shape, const float *a,
    const float *b, int64_t n)
{
	return same_bits_if(k, name, shape, a, b, n, 1);
}

/* The launches named what in g's profile (after gpu_prof_end). */
unsigned long
prof_launches(struct kc *k, const char *what)
{
	const struct gpu_prof_row *r;
	int n = gpu_prof_rows(k->g, &r);
	unsigned long c = 0;

	for (int i = 0; i < n; i++)
		if (strcmp(r[i].name, what) == 0)
			c += r[i].n;
	return c;
}

/* --- random quantized weights ------------------------------------------- */

/* Byte offsets of the fp16 scale fields in one block of t (-1 ends). */
static const int *
half_fields(int t)
{
	static const int q8[] = { 0, -1 }, q41[] = { 0, 2, -1 }, q6k[] = { 208, -1 }, none[] = { -1 };

	switch (t) {
	case QUANT_Q8_0: case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_IQ4_NL: case QUANT_IQ4_XS:
		return q8;
	case QUANT_Q4_1: case QUANT_Q5_1: case QUANT_Q4_K: case QUANT_Q5_K: return q41;
	case QUANT_Q6_K: return q6k;
	default: return none;
	}
}

/* rows x ne0 random weights of type t: random bits, finite scales of a sane size. */
uint8_t *
qrand(struct kc *k, int t, int64_t rows, int64_t ne0, size_t *nbytes)
{
	const struct quant_traits *tr = quant_traits(t);
	size_t rb = quant_row_size(t, ne0), n = rb * (size_t)rows;
	uint8_t *w = xmalloc(n);
	int64_t nel = rows * ne0;

	*nbytes = n;
	for (size_t i = 0; i < n; i++)
		w[i] = (uint8_t)(rnd(k) >> 56);
	if (t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16) {
		for (int64_t i = 0; i < nel; i++) {
			float f = unif(k, -1, 1);
			uint16_t h = t == QUANT_F16 ? quant_f32_to_f16(f) : quant_f32_to_bf16(f);
			if (t == QUANT_F32)
				memcpy(w + 4 * i, &f, 4);
			else
				memcpy(w + 2 * i, &h, 2);
		}
		return w;
	}
	for (size_t b = 0; b < n / (size_t)tr->size; b++) {
		uint8_t *blk = w + b * (size_t)tr->size;
		for (const int *o = half_fields(t); *o >= 0; o++) {
			uint16_t h = quant_f32_to_f16(unif(k, -0.05f, 0.05f));
			memcpy(blk + *o, &h, 2);
		}
		if (t == QUANT_NVFP4)
			for (int s = 0; s < 4; s++)
				blk[s] = (uint8_t)(0x20 + (rnd(k) >> 59));
	}
	return w;
}

/* wf[rows][ne0] = the CPU reference's dequantization. */
float *
qdeq(int t, const uint8_t *w, int64_t rows, int64_t ne0)
{
	float *wf = xmalloc((size_t)(rows * ne0) * sizeof *wf);
	size_t rb = quant_row_size(t, ne0);

	for (int64_t r = 0; r < rows; r++)
		if (quant_dequantize_row(t, w + r * rb, wf + r * ne0, ne0) != 0)
			die(1, "quant_dequantize_row: type %s failed", quant_name(t));
	return wf;
}

/* ref[j][r] = wf[r] . x[j] in double, mag = sum |w x|. */
void
dot_ref(const float *wf, const float *x, int64_t rows, int64_t ne0, int m,
    double scale, double *ref, double *mag)
{
	for (int j = 0; j < m; j++)
		for (int64_t r = 0; r < rows; r++) {
			double s = 0, a = 0;
			for (int64_t e = 0; e < ne0; e++) {
				double p = (double)wf[r * ne0 + e] * x[j * ne0 + e];
				s += p;
				a += fabs(p);
			}
			ref[j * rows + r] = s * scale;
			mag[j * rows + r] = a * fabs(scale) + 1e-30;
		}
}

#endif	/* MEMRA_HAVE_CUDA */
