/*
 * gdn-ref.h: the Gated DeltaNet recurrence in double (lib/backend.h's
 * definition), the reference of the CPU emulators of the CUDA kernels
 * (tools/gdn-step-emu.cc, tools/gdn-chunk-emu.cc).  For m rows of A (an
 * argument struct with qkv, ld, a, b, ssm_a, dt_bias, m, nk, nv, dv,
 * v_tiled, hf_l2, eps), key heads of dk: S = e^g S; d = beta (v - S^T k);
 * S += k d^T; o = S^T q, into S [nv][dk][dv] and o [m][nv][dv].
 */
#include <math.h>
#include <stddef.h>
#include <vector>

template <class Args>
static void
gdn_ref(const Args &A, int dk, double *S, double *o)
{
	int nk = A.nk, nv = A.nv, dv = A.dv;
	size_t kd = (size_t)nk * dk;
	std::vector<double> q(dk), k(dk), kv(dv);

	for (int r = 0; r < A.m; r++)
		for (int h = 0; h < nv; h++) {
			const float *row = A.qkv + (size_t)r * A.ld;
			int kh = A.v_tiled ? h % nk : h / (nv / nk);
			double sq = 0, sk = 0, nq, nkk, *Sh = S + (size_t)h * dk * dv;

			for (int i = 0; i < dk; i++) {
				q[i] = row[kh * dk + i], k[i] = row[kd + kh * dk + i];
				sq += q[i] * q[i], sk += k[i] * k[i];
			}
			nq = A.hf_l2 ? 1 / sqrt(sq + A.eps) : 1 / fmax(sqrt(sq), A.eps);
			nkk = A.hf_l2 ? 1 / sqrt(sk + A.eps) : 1 / fmax(sqrt(sk), A.eps);
			double a = A.a[(size_t)r * nv + h] + A.dt_bias[h], b = A.b[(size_t)r * nv + h];
			double beta = 1 / (1 + exp(-b)), g = A.ssm_a[h] * (a > 20 ? a : log1p(exp(a)));
			for (int i = 0; i < dk; i++)
				q[i] *= nq / sqrt((double)dk), k[i] *= nkk;
			for (int c = 0; c < dv; c++)
				kv[c] = 0;
			for (int i = 0; i < dk; i++)
				for (int c = 0; c < dv; c++) {
					Sh[i * dv + c] *= exp(g);
					kv[c] += Sh[i * dv + c] * k[i];
				}
			for (int c = 0; c < dv; c++) {
				double d = beta * (row[2 * kd + (size_t)h * dv + c] - kv[c]), oc = 0;

				for (int i = 0; i < dk; i++) {
					Sh[i * dv + c] += k[i] * d;
					oc += Sh[i * dv + c] * q[i];
				}
				o[(size_t)r * nv * dv + (size_t)h * dv + c] = oc;
			}
		}
}
