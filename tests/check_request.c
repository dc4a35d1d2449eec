/*
 * check_request.c: parameters -> request: path decoding and the query
 * string, methods, and the client key from REMOTE_ADDR, with the hostile
 * cases (missing, malformed, oversized) that must never crash a worker.
 */
#include <string.h>

#include "check_rlgate.h"
#include "request.h"
#include "util.h"

static void
parse(struct rlg_request *r, const char *method, const char *uri,
    const char *addr)
{
	char m[64], u[4200], a[300];
	char *envp[5];
	int n = 0;

	if (method != NULL) {
		snprintf(m, sizeof m, "REQUEST_METHOD=%s", method);
		envp[n++] = m;
	}
	if (uri != NULL) {
		snprintf(u, sizeof u, "REQUEST_URI=%s", uri);
		envp[n++] = u;
	}
	if (addr != NULL) {
		snprintf(a, sizeof a, "REMOTE_ADDR=%s", addr);
		envp[n++] = a;
	}
	envp[n] = NULL;
	rlg_request_parse(r, envp);
}

START_TEST(test_basic_get)
{
	struct rlg_request r;

	parse(&r, "GET", "/api/v1/resources?page=2&x=%00", "192.0.2.7");
	ck_assert_int_eq(r.method, RLG_METHOD_GET);
	ck_assert(r.path_ok);
	ck_assert_str_eq(r.path, "/api/v1/resources");
	ck_assert_str_eq(r.client, "192.0.2.7");
	parse(&r, "HEAD", "/api/v1/resources#frag", "192.0.2.7");
	ck_assert_int_eq(r.method, RLG_METHOD_HEAD);
	ck_assert_str_eq(r.path, "/api/v1/resources");
	parse(&r, "POST", "/api/v1/%72esources", "::1");
	ck_assert_int_eq(r.method, RLG_METHOD_OTHER);
	ck_assert_str_eq(r.method_name, "POST");
	ck_assert_str_eq(r.path, "/api/v1/resources");
}
END_TEST

START_TEST(test_param_lookup)
{
	char *envp[] = { "REMOTE_ADDRX=1", "REMOTE_ADDR=10.0.0.1",
	    "EMPTY=", NULL };

	ck_assert_str_eq(rlg_request_param(envp, "REMOTE_ADDR"), "10.0.0.1");
	ck_assert_str_eq(rlg_request_param(envp, "EMPTY"), "");
	ck_assert_ptr_null(rlg_request_param(envp, "REMOTE"));
	ck_assert_ptr_null(rlg_request_param(NULL, "REMOTE_ADDR"));
}
END_TEST

START_TEST(test_script_name_fallback)
{
	char *envp[] = { "REQUEST_METHOD=GET", "SCRIPT_NAME=/api",
	    "PATH_INFO=/v1/resources", "REMOTE_ADDR=10.0.0.1", NULL };
	char *none[] = { "REQUEST_METHOD=GET", NULL };
	struct rlg_request r;

	rlg_request_parse(&r, envp);
	ck_assert(r.path_ok);
	ck_assert_str_eq(r.path, "/api/v1/resources");
	rlg_request_parse(&r, none);
	ck_assert(!r.path_ok);
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
}
END_TEST

START_TEST(test_bad_paths)
{
	struct rlg_request r;
	char longuri[4096];

	parse(&r, "GET", "/api/%zz", "10.0.0.1");
	ck_assert(!r.path_ok);
	ck_assert_str_eq(r.path, "");
	parse(&r, "GET", "/api/%00x", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "GET", "/api/%4", "10.0.0.1");
	ck_assert(!r.path_ok);
	parse(&r, "GET", "api/v1/resources", "10.0.0.1");
	ck_assert(!r.path_ok);
	memset(longuri, 'a', sizeof longuri - 1);
	longuri[0] = '/';
	longuri[sizeof longuri - 1] = '\0';
	parse(&r, "GET", longuri, "10.0.0.1");
	ck_assert(!r.path_ok);
	/* Non-UTF-8 and CR/LF bytes decode, and simply do not match. */
	parse(&r, "GET", "/api/%ff%0d%0a", "10.0.0.1");
	ck_assert(r.path_ok);
	ck_assert_str_eq(r.path, "/api/\xff\r\n");
}
END_TEST

START_TEST(test_decode_bounds)
{
	char out[8];

	ck_assert_int_eq(rlg_request_decode_path("/1234567", out, sizeof out),
	    RLG_ENOSPC);
	ck_assert_int_eq(rlg_request_decode_path("/123456", out, sizeof out),
	    RLG_OK);
	ck_assert_str_eq(out, "/123456");
	ck_assert_int_eq(rlg_request_decode_path("/%41%42?q", out, sizeof out),
	    RLG_OK);
	ck_assert_str_eq(out, "/AB");
	ck_assert_int_eq(rlg_request_decode_path("/", out, 0), RLG_ENOSPC);
}
END_TEST

START_TEST(test_client_keys)
{
	struct rlg_request r;
	char key[64];

	parse(&r, "GET", "/", "2001:DB8:0:0:0:0:0:1");
	ck_assert_str_eq(r.client, "2001:db8::1");
	parse(&r, "GET", "/", "127.0.0.2");
	ck_assert_str_eq(r.client, "127.0.0.2");
	parse(&r, "GET", "/", "");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", "999.1.1.1");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", "10.0.0.1\r\nX-Evil: 1");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", "fe80::1%eth0");
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	parse(&r, "GET", "/", NULL);
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	ck_assert_int_eq(rlg_request_client_key("10.1.2.3", key, 4),
	    RLG_EINVAL);
	ck_assert_str_eq(key, "unk");
	ck_assert_int_eq(rlg_request_client_key("10.1.2.3", key, sizeof key),
	    RLG_OK);
}
END_TEST

START_TEST(test_missing_everything)
{
	char *envp[] = { NULL };
	struct rlg_request r;
	char method[300];

	rlg_request_parse(&r, envp);
	ck_assert_int_eq(r.method, RLG_METHOD_OTHER);
	ck_assert_str_eq(r.method_name, "");
	ck_assert(!r.path_ok);
	ck_assert_str_eq(r.client, RLG_CLIENT_UNKNOWN);
	rlg_request_parse(&r, NULL);
	ck_assert(!r.path_ok);
	memset(method, 'G', sizeof method - 1);
	method[sizeof method - 1] = '\0';
	parse(&r, method, "/", "10.0.0.1");
	ck_assert_int_eq(strlen(r.method_name), RLG_METHOD_MAX);
	ck_assert_int_eq(r.method, RLG_METHOD_OTHER);
}
END_TEST

Suite *
rlg_request_suite(void)
{
	Suite *s = suite_create("request");
	TCase *core = tcase_create("core"), *hostile = tcase_create("hostile");

	tcase_add_test(core, test_basic_get);
	tcase_add_test(core, test_param_lookup);
	tcase_add_test(core, test_script_name_fallback);
	tcase_add_test(core, test_client_keys);
	tcase_add_test(hostile, test_bad_paths);
	tcase_add_test(hostile, test_decode_bounds);
	tcase_add_test(hostile, test_missing_everything);
	suite_add_tcase(s, core);
	suite_add_tcase(s, hostile);
	return s;
}
