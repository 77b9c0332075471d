#include <pthread.h>

#include "metrics.h"
#include "test.h"

TEST(names_types_and_bounds_are_checked)
{
	struct metrics *m = metrics_new();
	static const double b[] = { 0.1, 1 }, bad[] = { 1, 0.1 };

	CHECK(metrics_family(m, METRICS_COUNTER, "a_total", "h", "", NULL, 0) == 0);
	CHECK(metrics_family(m, METRICS_COUNTER, "a_total", "h", "", NULL, 0) == -1);	/* twice */
	CHECK(metrics_family(m, METRICS_COUNTER, "b", "h", "", NULL, 0) == -1);	/* no _total */
	CHECK(metrics_family(m, METRICS_GAUGE, "b_total", "h", "", NULL, 0) == -1);
	CHECK(metrics_family(m, METRICS_GAUGE, "9b", "h", "", NULL, 0) == -1);
	CHECK(metrics_family(m, METRICS_GAUGE, "b:c", "h", "x,y", NULL, 0) == 1);
	CHECK(metrics_family(m, METRICS_GAUGE, "c", "h", "a:b", NULL, 0) == -1);
	CHECK(metrics_family(m, METRICS_GAUGE, "c", "h", "__x", NULL, 0) == -1);
	CHECK(metrics_family(m, METRICS_GAUGE, "c", "h", "a,b,c,d,e", NULL, 0) == -1);
	CHECK(metrics_family(m, METRICS_HISTOGRAM, "c", "h", "le", b, 2) == -1);
	CHECK(metrics_family(m, METRICS_HISTOGRAM, "c", "h", "", bad, 2) == -1);
	CHECK(metrics_family(m, METRICS_HISTOGRAM, "c", "h", "", NULL, 0) == -1);
	CHECK(metrics_family(m, METRICS_HISTOGRAM, "c_seconds", "h", "", b, 2) == 2);
	CHECK(metrics_add(m, 0, NULL, -1) == -1);	/* counters only go up */
	CHECK(metrics_set(m, 0, NULL, 3) == -1);
	CHECK(metrics_observe(m, 0, NULL, 3) == -1);
	CHECK(metrics_add(m, 2, NULL, 3) == -1);
	CHECK(metrics_add(m, 7, NULL, 3) == -1);
	CHECK(metrics_add(m, 0, NULL, 2.5) == 0);
	CHECK_NEAR(metrics_get(m, 0, NULL), 2.5, 0);
	metrics_free(m);
	metrics_free(NULL);
}

TEST(renders_the_text_format)
{
	struct metrics *m = metrics_new();
	static const double b[] = { 0.005, 0.1, 1 };
	int req = metrics_family(m, METRICS_COUNTER, "memra_requests_total", "Requests, by endpoint",
	    "endpoint,status", NULL, 0);
	int q = metrics_family(m, METRICS_GAUGE, "memra_queue", "Waiting\\now\nhere", "", NULL, 0);
	int h = metrics_family(m, METRICS_HISTOGRAM, "memra_ttft_seconds", "TTFT", "", b, 3);
	int e = metrics_family(m, METRICS_COUNTER, "memra_empty_total", "No series yet", "model",
	    NULL, 0);
	size_t n;
	char *out;

	metrics_add(m, req, (const char *[]){ "/v1/completions", "200" }, 1);
	metrics_add(m, req, (const char *[]){ "/v1/completions", "200" }, 2);
	metrics_add(m, req, (const char *[]){ "/a\"b\\c\n", "404" }, 1);
	metrics_set(m, q, NULL, 7);
	metrics_add(m, q, NULL, -2);
	metrics_observe(m, h, NULL, 0.005);	/* le is inclusive */
	metrics_observe(m, h, NULL, 0.5);
	metrics_observe(m, h, NULL, 30);
	CHECK_NEAR(metrics_get(m, h, NULL), 3, 0);
	CHECK(e == 3);
	out = metrics_render(m, &n);
	CHECK_EQ_STR(out,
	    "# HELP memra_requests_total Requests, by endpoint\n"
	    "# TYPE memra_requests_total counter\n"
	    "memra_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 3\n"
	    "memra_requests_total{endpoint=\"/a\\\"b\\\\c\\n\",status=\"404\"} 1\n"
	    "# HELP memra_queue Waiting\\\\now\\nhere\n"
	    "# TYPE memra_queue gauge\n"
	    "memra_queue 5\n"
	    "# HELP memra_ttft_seconds TTFT\n"
	    "# TYPE memra_ttft_seconds histogram\n"
	    "memra_ttft_seconds_bucket{le=\"0.005\"} 1\n"
	    "memra_ttft_seconds_bucket{le=\"0.1\"} 1\n"
	    "memra_ttft_seconds_bucket{le=\"1\"} 2\n"
	    "memra_ttft_seconds_bucket{le=\"+Inf\"} 3\n"
	    "memra_ttft_seconds_sum 30.505\n"
	    "memra_ttft_seconds_count 3\n"
	    "# HELP memra_empty_total No series yet\n"
	    "# TYPE memra_empty_total counter\n");
	CHECK_EQ_INT(n, strlen(out));
	free(out);
	metrics_free(m);
}

struct hammer {
	struct metrics *m;
	int	c, h;
};

static void *
hammer(void *arg)
{
	struct hammer *x = arg;
	const char *v[] = { "x" };

	for (int i = 0; i < 20000; i++) {
		metrics_add(x->m, x->c, v, 1);
		metrics_observe(x->m, x->h, NULL, i % 3);
	}
	return NULL;
}

TEST(threads_lose_no_count)
{
	static const double b[] = { 1 };
	struct hammer x = { metrics_new(), 0, 0 };
	pthread_t t[4];
	size_t n;
	char *out;

	x.c = metrics_family(x.m, METRICS_COUNTER, "n_total", "n", "k", NULL, 0);
	x.h = metrics_family(x.m, METRICS_HISTOGRAM, "d", "d", "", b, 1);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, hammer, &x);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_NEAR(metrics_get(x.m, x.c, (const char *[]){ "x" }), 80000, 0);
	out = metrics_render(x.m, &n);
	CHECK(strstr(out, "d_bucket{le=\"1\"} 53336\n") != NULL);	/* i % 3 <= 1 */
	CHECK(strstr(out, "d_count 80000\n") != NULL);
	free(out);
	metrics_free(x.m);
}

TEST(process_numbers)
{
	struct metrics_proc p;

	CHECK(metrics_proc_read(&p) == 0);
	CHECK(p.rss_bytes > 0 && p.vsize_bytes >= p.rss_bytes);
	CHECK(p.open_fds >= 3 && p.max_fds >= p.open_fds);
	CHECK(p.start_time > 1.5e9 && p.threads >= 1 && p.cpu_seconds >= 0);
}

int
main(void)
{
	RUN(names_types_and_bounds_are_checked);
	RUN(renders_the_text_format);
	RUN(threads_lose_no_count);
	RUN(process_numbers);
	return test_summary();
}
