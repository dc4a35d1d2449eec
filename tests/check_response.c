/*
 * check_response.c: the exact bytes of every answer: status lines, the
 * draft03 rate-limit headers with their rounding, Retry-After, Allow, the
 * seed's JSON bodies, HEAD without a body, and a writer that fails.
 */
#include <string.h>

#include "check_rlgate.h"
#include "response.h"
#include "util.h"

struct sink {
	char buf[2048];
	size_t used;
	int calls;
};

static int
sink_write(void *ctx, const char *buf, size_t len)
{
	struct sink *s = ctx;

	ck_assert_uint_lt(s->used + len, sizeof s->buf);
	memcpy(s->buf + s->used, buf, len);
	s->used += len;
	s->buf[s->used] = '\0';
	s->calls++;
	return 0;
}

static int
failing_write(void *ctx, const char *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return -5;
}

static const char *
answer(enum rlg_outcome o, const struct rlg_decision *d, bool head)
{
	static struct sink s;
	struct rlg_answer a = { o, head, RLG_STYLE_DRAFT03, d };

	memset(&s, 0, sizeof s);
	ck_assert_int_eq(rlg_response_write(&a, sink_write, &s), 0);
	ck_assert_int_eq(s.calls, 1);
	return s.buf;
}

START_TEST(test_200)
{
	struct rlg_decision d = { true, 5, 4, 45000, 0 };

	ck_assert_str_eq(answer(RLG_OUT_ADMITTED, &d, false),
	    "Status: 200 OK\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 4\r\n"
	    "RateLimit-Reset: 45\r\n"
	    "Content-Length: 71\r\n"
	    "\r\n"
	    "{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}");
}
END_TEST

START_TEST(test_429)
{
	struct rlg_decision d = { false, 5, 0, 11200, 11200 };

	ck_assert_str_eq(answer(RLG_OUT_REJECTED, &d, false),
	    "Status: 429 Too Many Requests\r\n"
	    "Content-Type: application/json\r\n"
	    "Cache-Control: no-store\r\n"
	    "RateLimit-Limit: 5\r\n"
	    "RateLimit-Remaining: 0\r\n"
	    "RateLimit-Reset: 12\r\n"
	    "Retry-After: 12\r\n"
	    "Content-Length: 74\r\n"
	    "\r\n"
	    "{\"error\":{\"code\":429,\"message\":\"Too Many Requests. Rate limit exceeded.\"}}");
}
END_TEST

START_TEST(test_head_has_no_body)
{
	struct rlg_decision d = { true, 5, 3, 1000, 0 };
	const char *out = answer(RLG_OUT_ADMITTED, &d, true);

	ck_assert_ptr_nonnull(strstr(out, "Content-Length: 71\r\n\r\n"));
	ck_assert_str_eq(strstr(out, "\r\n\r\n"), "\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(out, "RateLimit-Reset: 1\r\n"));
}
END_TEST

START_TEST(test_errors)
{
	struct rlg_decision d = { true, 5, 2, 1000, 0 };
	const char *out;

	out = answer(RLG_OUT_NOT_FOUND, &d, false);
	ck_assert_ptr_nonnull(strstr(out, "Status: 404 Not Found\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "RateLimit-Remaining: 2\r\n"));
	ck_assert_str_eq(strstr(out, "\r\n\r\n") + 4,
	    "{\"error\":{\"code\":404,\"message\":\"Not Found.\"}}");

	out = answer(RLG_OUT_BAD_METHOD, &d, false);
	ck_assert_ptr_nonnull(strstr(out, "Status: 405 Method Not Allowed\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "Allow: GET, HEAD\r\n"));
	ck_assert_str_eq(strstr(out, "\r\n\r\n") + 4,
	    "{\"error\":{\"code\":405,\"message\":\"Method Not Allowed.\"}}");

	out = answer(RLG_OUT_BAD_REQUEST, &d, false);
	ck_assert_ptr_nonnull(strstr(out, "Status: 400 Bad Request\r\n"));

	out = answer(RLG_OUT_STORE_DOWN, NULL, false);
	ck_assert_ptr_nonnull(strstr(out,
	    "Status: 503 Service Unavailable\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "Retry-After: 1\r\n"));
	ck_assert_ptr_null(strstr(out, "RateLimit-"));
	ck_assert_ptr_nonnull(strstr(out, "Content-Type: application/json\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "\"code\":503"));

	/* on_error = open passes without rate-limit headers. */
	out = answer(RLG_OUT_ADMITTED, NULL, false);
	ck_assert_ptr_null(strstr(out, "RateLimit-"));
	ck_assert_ptr_nonnull(strstr(out, "Status: 200 OK\r\n"));
}
END_TEST

START_TEST(test_seconds_rounding)
{
	ck_assert_int_eq(rlg_response_seconds(0), 1);
	ck_assert_int_eq(rlg_response_seconds(-5), 1);
	ck_assert_int_eq(rlg_response_seconds(1), 1);
	ck_assert_int_eq(rlg_response_seconds(999), 1);
	ck_assert_int_eq(rlg_response_seconds(1000), 1);
	ck_assert_int_eq(rlg_response_seconds(1001), 2);
	ck_assert_int_eq(rlg_response_seconds(60000), 60);
	ck_assert_int_eq(rlg_response_seconds(31622400000LL), 31622400);
}
END_TEST

START_TEST(test_retry_never_below_one)
{
	struct rlg_decision d = { false, 1, 0, 1, 1 };
	const char *out = answer(RLG_OUT_REJECTED, &d, false);

	ck_assert_ptr_nonnull(strstr(out, "Retry-After: 1\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "RateLimit-Reset: 1\r\n"));
}
END_TEST

START_TEST(test_small_buffer_and_failing_writer)
{
	struct rlg_decision d = { true, 5, 4, 45000, 0 };
	struct rlg_answer a = { RLG_OUT_ADMITTED, false, RLG_STYLE_DRAFT03, &d };
	char small[40];

	ck_assert_int_eq(rlg_response_format(&a, small, sizeof small),
	    RLG_ENOSPC);
	ck_assert_str_eq(small, "");
	ck_assert_int_eq(rlg_response_write(&a, failing_write, NULL), -5);
	a.outcome = (enum rlg_outcome)99;
	ck_assert_int_eq(rlg_response_format(&a, small, sizeof small),
	    RLG_EINVAL);
}
END_TEST

Suite *
rlg_response_suite(void)
{
	Suite *s = suite_create("response");
	TCase *core = tcase_create("core"), *limits = tcase_create("limits");

	tcase_add_test(core, test_200);
	tcase_add_test(core, test_429);
	tcase_add_test(core, test_head_has_no_body);
	tcase_add_test(core, test_errors);
	tcase_add_test(limits, test_seconds_rounding);
	tcase_add_test(limits, test_retry_never_below_one);
	tcase_add_test(limits, test_small_buffer_and_failing_writer);
	suite_add_tcase(s, core);
	suite_add_tcase(s, limits);
	return s;
}
