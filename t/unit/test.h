/*
 * A tiny unit-test harness: each t/unit/<name>.c is one program.
 *   TEST(name) { ... CHECK(expr); CHECK_EQ_INT(a, b); ... }
 *   int main(void) { RUN(name); ...; return test_summary(); }
 * Prints "ok"/"not ok" per test and a closing "N passed, N failed".
 */
#ifndef MEMRA_TEST_H
#define MEMRA_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_pass, test_fail, test_cur_failed;
static const char *test_cur;

#define TEST(name) static void test_##name(void)
#define RUN(name) do { \
	test_cur = #name; test_cur_failed = 0; test_##name(); \
	if (test_cur_failed) test_fail++; else { test_pass++; printf("ok %s\n", #name); } \
} while (0)

#define FAILF(...) do { \
	if (!test_cur_failed) printf("not ok %s\n", test_cur); \
	test_cur_failed = 1; \
	printf("#   %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); \
} while (0)

#define CHECK(e) do { if (!(e)) FAILF("CHECK(%s)", #e); } while (0)
#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) FAILF("%s == %lld, want %lld", #a, _a, _b); } while (0)
#define CHECK_EQ_STR(a, b) do { const char *_a = (a), *_b = (b); \
	if (_a == NULL || _b == NULL || strcmp(_a, _b) != 0) \
		FAILF("%s == \"%s\", want \"%s\"", #a, _a ? _a : "(null)", _b ? _b : "(null)"); } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); \
	if (!(fabs(_a - _b) <= (tol))) FAILF("%s == %.9g, want %.9g (tol %g)", #a, _a, _b, (double)(tol)); } while (0)

/*
 * The fixture model A's directory (MEMRA_MODEL_A, else ../shared/models/A,
 * holding refs.json), or NULL when it is absent: then a line says so for
 * test program `name`, a skip, or under MEMRA_REQUIRE_PEERS=1 (CI) a
 * failure counted in the summary.
 */
static inline const char *
test_model_a(const char *name)
{
	char path[1024];
	const char *dir = getenv("MEMRA_MODEL_A"), *req = getenv("MEMRA_REQUIRE_PEERS");
	FILE *fp;

	if (dir == NULL || *dir == '\0')
		dir = "../shared/models/A";
	snprintf(path, sizeof path, "%s/refs.json", dir);
	if ((fp = fopen(path, "r")) != NULL) {
		fclose(fp);
		return dir;
	}
	if (req != NULL && strcmp(req, "1") == 0) {
		printf("not ok %s: fixture model A missing at %s\n", name, dir);
		test_fail++;
	} else
		printf("ok %s # skip: no fixture at %s\n", name, dir);
	return NULL;
}

static int
test_summary(void)
{
	printf("%d passed, %d failed\n", test_pass, test_fail);
	return test_fail ? 1 : 0;
}

#endif
