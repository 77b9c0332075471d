#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "gguf.h"
#include "quant.h"
#include "ranks.h"
#include "test.h"
#include "util.h"

static struct ranks *
T(const char *s, int64_t n_vocab, char *err)
{
	return ranks_parse_txt(s, strlen(s), n_vocab, err);
}

TEST(txt_reads_ids_in_rank_order)
{
	char err[UTIL_ERRLEN];
	struct ranks *r = T("7\n0\n42\n", 100, err);

	CHECK(r != NULL);
	CHECK_EQ_INT(r->n, 3);
	CHECK_EQ_INT(r->ids[0], 7);
	CHECK_EQ_INT(r->ids[1], 0);
	CHECK_EQ_INT(r->ids[2], 42);
	ranks_free(r);
	r = T("5\r\n6", 0, err);	/* CRLF, no final newline, no bound */
	CHECK(r != NULL && r->n == 2 && r->ids[1] == 6);
	ranks_free(r);
	ranks_free(NULL);
}

TEST(txt_errors_name_the_line)
{
	char err[UTIL_ERRLEN];

	CHECK(T("1\n\n2\n", 10, err) == NULL);
	CHECK_EQ_STR(err, "line 2: blank line");
	CHECK(T("1\n2\n -3\n", 10, err) == NULL);
	CHECK_EQ_STR(err, "line 3: not a token id: ' -3'");
	CHECK(T("1\n2x\n", 10, err) == NULL);
	CHECK_EQ_STR(err, "line 2: not a token id: '2x'");
	CHECK(T("3\n10\n", 10, err) == NULL);
	CHECK_EQ_STR(err, "line 2: id 10 is outside the vocabulary (10 tokens)");
	CHECK(T("3\n4\n5\n4\n3\n", 10, err) == NULL);
	CHECK_EQ_STR(err, "line 4: id 4 repeats line 2");
	CHECK(T("99999999999\n", 0, err) == NULL);
	CHECK_EQ_STR(err, "line 1: id '99999999999' is too large");
	CHECK(T("", 10, err) == NULL);
	CHECK_EQ_STR(err, "no ids");
	CHECK(T("1\n2\n\n", 10, err) == NULL);	/* a blank last line is not a final newline */
	CHECK_EQ_STR(err, "line 3: blank line");
}

TEST(check_counts_from_zero)
{
	char err[UTIL_ERRLEN];
	int32_t ok[] = { 2, 1, 0 }, dup[] = { 2, 1, 2 }, neg[] = { 1, -1 };

	CHECK(ranks_check(ok, 3, 3, err) == 0);
	CHECK(ranks_check(ok, 3, 2, err) == -1);
	CHECK_EQ_STR(err, "index 0: id 2 is outside the vocabulary (2 tokens)");
	CHECK(ranks_check(dup, 3, 0, err) == -1);
	CHECK_EQ_STR(err, "index 2: id 2 repeats index 0");
	CHECK(ranks_check(neg, 2, 0, err) == -1);
	CHECK_EQ_STR(err, "index 1: id -1 is negative");
}

static char *
tmpname(const char *suffix)
{
	static char buf[256];

	snprintf(buf, sizeof buf, "/tmp/ranks-unit-%ld%s", (long)getpid(), suffix);
	return buf;
}

TEST(gguf_and_txt_round_trip)
{
	char err[UTIL_ERRLEN], g[256], t[256];
	int32_t ids[] = { 9, 3, 5, 0 };
	struct ranks *a, *b;

	snprintf(g, sizeof g, "%s", tmpname(".gguf"));
	snprintf(t, sizeof t, "%s", tmpname(".txt"));
	CHECK(ranks_write_gguf(g, ids, 4, 10, err) == 0);
	CHECK(ranks_write_txt(t, ids, 4, err) == 0);
	a = ranks_load(g, 10, err);
	b = ranks_load(t, 10, err);
	CHECK(a != NULL && b != NULL);
	if (a != NULL && b != NULL) {
		CHECK_EQ_INT(a->n, 4);
		CHECK(memcmp(a->ids, ids, sizeof ids) == 0);
		CHECK(memcmp(b->ids, ids, sizeof ids) == 0);
	}
	ranks_free(a);
	ranks_free(b);
	CHECK(ranks_load(g, 12, err) == NULL);	/* the recorded vocabulary differs */
	CHECK(strstr(err, "ranks are for a vocabulary of 10 tokens, the model has 12") != NULL);
	CHECK(ranks_load(g, 5, err) == NULL);
	CHECK(ranks_load(t, 5, err) == NULL);
	CHECK(strstr(err, ".txt: line 1: id 9 is outside the vocabulary (5 tokens)") != NULL);
	unlink(g);
	unlink(t);
}

/* A d2t container written the EAGLE3 way: I64, no vocabulary key. */
TEST(gguf_i64_d2t_reads_as_absolute_ids)
{
	char err[UTIL_ERRLEN], path[256];
	int64_t ids[] = { 4, 1 << 20, 2 }, ne[1] = { 3 };
	FILE *fp;
	struct gguf_writer *w;
	struct ranks *r;

	snprintf(path, sizeof path, "%s", tmpname("-i64.gguf"));
	fp = fopen(path, "wb");
	CHECK(fp != NULL);
	if (fp == NULL)
		return;
	w = gguf_writer_new(fp);
	CHECK(gguf_writer_add_tensor(w, "d2t", QUANT_I64, 1, ne) == 0);
	CHECK(gguf_writer_write_header(w) == 0);
	CHECK(gguf_writer_write(w, ids, sizeof ids) == 0);
	CHECK(gguf_writer_finish(w) == 0);
	gguf_writer_free(w);
	fclose(fp);
	r = ranks_load(path, 0, err);
	CHECK(r != NULL && r->n == 3 && r->ids[1] == 1 << 20 && r->ids[2] == 2);
	ranks_free(r);
	CHECK(ranks_load(path, 1000, err) == NULL);
	CHECK(strstr(err, "tensor 'd2t': index 1: id 1048576 is outside the vocabulary") != NULL);
	unlink(path);
}

TEST(gather_copies_rows_in_rank_order)
{
	char err[UTIL_ERRLEN];
	unsigned char src[5][3], dst[3][3];
	int32_t ids[] = { 4, 0, 2 };

	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 3; j++)
			src[i][j] = (unsigned char)(10 * i + j);
	CHECK(ranks_gather(dst, src, 3, 5, ids, 0, 3, err) == 0);
	CHECK(memcmp(dst[0], src[4], 3) == 0);
	CHECK(memcmp(dst[1], src[0], 3) == 0);
	CHECK(memcmp(dst[2], src[2], 3) == 0);
	CHECK(ranks_gather(dst, src, 3, 5, ids, 1, 2, err) == 0);	/* a chunk */
	CHECK(memcmp(dst[0], src[0], 3) == 0 && memcmp(dst[1], src[2], 3) == 0);
	CHECK(ranks_gather(dst, src, 3, 4, ids, 0, 3, err) == -1);
	CHECK_EQ_STR(err, "gather: id 4 is not a row of a 4-row weight");
}

/* A masked head gives, row for row, the full head's products. */
TEST(head_init_matmul_equals_the_full_rows)
{
	char err[UTIL_ERRLEN];
	struct backend *be = backend_open("cpu", 1, err);
	struct backend_weight full = { 0 }, head = { 0 };
	int32_t ids[] = { 6, 1, 3 };
	struct ranks r = { ids, 3, 8 };
	float wsrc[8][32], x[32], yf[8], yh[3];
	void *buf = NULL;

	CHECK(be != NULL);
	if (be == NULL)
		return;
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 32; j++)
			wsrc[i][j] = sinf((float)(i * 32 + j));
	for (int j = 0; j < 32; j++)
		x[j] = cosf((float)j);
	CHECK(backend_weight_init(be, &full, QUANT_F32, 32, 8, wsrc, 1) == 0);
	CHECK(ranks_head_init(be, &head, &buf, &r, QUANT_F32, 32, 8, wsrc, 1, err) == 0);
	CHECK_EQ_INT(head.ne1, 3);
	CHECK(backend_matmul(be, &full, x, 32, yf, 8, 1) == 0);
	CHECK(backend_matmul(be, &head, x, 32, yh, 3, 1) == 0);
	for (int i = 0; i < 3; i++)
		CHECK(yh[i] == yf[ids[i]]);
	CHECK_EQ_INT(ranks_argmax(&r, yh), ranks_target(&r, yh[0] >= yh[1] && yh[0] >= yh[2] ? 0 :
	    yh[1] >= yh[2] ? 1 : 2));
	backend_weight_release(be, &head);
	backend_weight_release(be, &full);
	free(buf);
	backend_close(be);
}

TEST(argmax_and_scatter_map_back_through_d2t)
{
	int32_t ids[] = { 9, 2, 5 };
	struct ranks r = { ids, 3, 10 };
	float lg[] = { 1.0f, 3.0f, 3.0f }, full[10];

	CHECK_EQ_INT(ranks_argmax(&r, lg), 2);	/* a tie goes to the lower target id */
	lg[1] = -INFINITY;
	CHECK_EQ_INT(ranks_argmax(&r, lg), 5);
	lg[0] = lg[2] = NAN;
	CHECK_EQ_INT(ranks_argmax(&r, lg), -1);
	CHECK_EQ_INT(ranks_target(&r, 0), 9);
	CHECK_EQ_INT(ranks_target(&r, 3), -1);
	lg[0] = 1, lg[1] = 2, lg[2] = 3;
	CHECK(ranks_scatter(&r, lg, full, 10) == 0);
	CHECK(full[9] == 1 && full[2] == 2 && full[5] == 3 && full[0] == -INFINITY);
	CHECK(ranks_scatter(&r, lg, full, 9) == -1);
}

/* A tiny draft: qwen35, n_embd 32, block 2, vocabulary 10, head rows = d2t. */
static int
write_draft(const char *path, int head_rows, const int32_t *d2t, int n)
{
	static float zero[64 * 32];
	int64_t eh[2] = { 64, 32 }, emb[2] = { 32, 10 }, out[2] = { 32, head_rows }, dn[1] = { n };
	FILE *fp = fopen(path, "wb");
	struct gguf_writer *w = fp ? gguf_writer_new(fp) : NULL;
	int rc;

	if (w == NULL)
		return -1;
	rc = gguf_writer_add_str(w, "general.architecture", "qwen35", 6) |
	    gguf_writer_add_u32(w, "qwen35.embedding_length", 32) |
	    gguf_writer_add_tensor(w, "blk.2.nextn.eh_proj.weight", QUANT_F32, 2, eh) |
	    gguf_writer_add_tensor(w, "token_embd.weight", QUANT_F32, 2, emb) |
	    gguf_writer_add_tensor(w, "output.weight", QUANT_F32, 2, out) |
	    gguf_writer_add_tensor(w, "d2t", QUANT_I32, 1, dn) |
	    gguf_writer_write_header(w) |
	    gguf_writer_write(w, zero, sizeof zero) |
	    gguf_writer_write(w, zero, 32 * 10 * 4) |
	    gguf_writer_write(w, zero, 32 * (size_t)head_rows * 4) |
	    gguf_writer_write(w, d2t, (size_t)n * 4) |
	    gguf_writer_finish(w);
	gguf_writer_free(w);
	fclose(fp);
	return rc ? -1 : 0;
}

static struct ranks *
draft(const char *path, const char *arch, int64_t n_embd, int64_t n_vocab, int64_t block,
    char *err)
{
	struct gguf *g = gguf_open(path, err);
	struct ranks *r = g ? ranks_from_draft(g, arch, n_embd, n_vocab, block, err) : NULL;

	gguf_close(g);
	return r;
}

TEST(draft_attach_checks_the_trunk_geometry)
{
	char err[UTIL_ERRLEN], path[256];
	int32_t d2t[] = { 9, 0, 4 };
	struct ranks *r;

	snprintf(path, sizeof path, "%s", tmpname("-draft.gguf"));
	CHECK(write_draft(path, 3, d2t, 3) == 0);
	r = draft(path, "qwen35", 32, 10, 2, err);
	CHECK(r != NULL && r->n == 3 && r->ids[0] == 9);
	ranks_free(r);
	CHECK(draft(path, "llama", 32, 10, 2, err) == NULL);
	CHECK_EQ_STR(err, "draft is not a 'llama' model (general.architecture)");
	CHECK(draft(path, "qwen35", 64, 10, 2, err) == NULL);
	CHECK_EQ_STR(err, "draft hidden size (qwen35.embedding_length) is not the trunk's 64");
	CHECK(draft(path, "qwen35", 32, 10, 3, err) == NULL);
	CHECK_EQ_STR(err, "draft has no MTP block blk.3 (tensor 'blk.3.nextn.eh_proj.weight')");
	CHECK(draft(path, "qwen35", 32, 12, 2, err) == NULL);
	CHECK_EQ_STR(err, "draft tensor 'token_embd.weight' is 10 x 32, want 12 x 32");
	CHECK(write_draft(path, 4, d2t, 3) == 0);	/* head rows != d2t length */
	CHECK(draft(path, "qwen35", 32, 10, 2, err) == NULL);
	CHECK_EQ_STR(err, "draft tensor 'output.weight' is 4 x 32, want 3 x 32");
	d2t[2] = 10;
	CHECK(write_draft(path, 3, d2t, 3) == 0);
	CHECK(draft(path, "qwen35", 32, 10, 2, err) == NULL);
	CHECK_EQ_STR(err, "tensor 'd2t': index 2: id 10 is outside the vocabulary (10 tokens)");
	unlink(path);
}

int
main(void)
{
	RUN(txt_reads_ids_in_rank_order);
	RUN(txt_errors_name_the_line);
	RUN(check_counts_from_zero);
	RUN(gguf_and_txt_round_trip);
	RUN(gguf_i64_d2t_reads_as_absolute_ids);
	RUN(gather_copies_rows_in_rank_order);
	RUN(head_init_matmul_equals_the_full_rows);
	RUN(argmax_and_scatter_map_back_through_d2t);
	RUN(draft_attach_checks_the_trunk_geometry);
	return test_summary();
}
