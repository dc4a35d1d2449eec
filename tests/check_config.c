/*
 * check_config.c: the config loader. "core" checks what a good file
 * becomes, "errors" that every kind of problem is reported on its own line
 * with its exact line number and text, all of them in one pass, and
 * "files" the loading from disk and the choice of the file to load.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_rlgate.h"
#include "config.h"

/* One value that a key must refuse, and what the loader says. */
struct rlg_t_bad {
	const char *section;   /* the header, without brackets */
	const char *key;
	const char *value;
	const char *msg;       /* the problem, after "t.conf:2: " */
};

static char *rlg_t_fmt(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *rlg_t_repeat(char c, size_t n);
static char *rlg_t_load(const char *text, int *n, struct rlg_config **cfg);
static void rlg_t_expect(const char *text, int count, const char *want);
static struct rlg_config *rlg_t_ok(const char *text);
static const char *rlg_t_tmpdir(void);
static char *rlg_t_file(const char *content, size_t len);

#define RLG_T_LIMIT_RANGE "must be an integer from 1 to 1000000000"
#define RLG_T_WINDOW_RANGE "must be an integer from 1 to 31622400"
#define RLG_T_BUSY_RANGE "must be an integer from 0 to 600000"

static const struct rlg_t_bad rlg_t_bad_values[] = {
	{ "policy default", "limit", "abc",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"abc\")" },
	{ "policy default", "limit", "60s",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"60s\")" },
	{ "policy default", "limit", "-1",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"-1\")" },
	{ "policy default", "limit", "0",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"0\")" },
	{ "policy default", "limit", "99999999999999999999",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE
	    " (got \"99999999999999999999\")" },
	{ "policy default", "limit", "1000000001",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE
	    " (got \"1000000001\")" },
	{ "policy default", "limit", "+5",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"+5\")" },
	{ "policy default", "limit", "0x10",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"0x10\")" },
	{ "policy default", "limit", "1.5",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"1.5\")" },
	{ "policy default", "limit", "1 2",
	    "[policy default] limit: " RLG_T_LIMIT_RANGE " (got \"1 2\")" },
	{ "policy default", "window", "0",
	    "[policy default] window: " RLG_T_WINDOW_RANGE " (got \"0\")" },
	{ "policy default", "window", "60s",
	    "[policy default] window: " RLG_T_WINDOW_RANGE " (got \"60s\")" },
	{ "policy default", "window", "-1",
	    "[policy default] window: " RLG_T_WINDOW_RANGE " (got \"-1\")" },
	{ "policy default", "window", "31622401",
	    "[policy default] window: " RLG_T_WINDOW_RANGE
	    " (got \"31622401\")" },
	{ "policy default", "window", "99999999999999999999",
	    "[policy default] window: " RLG_T_WINDOW_RANGE
	    " (got \"99999999999999999999\")" },
	{ "store", "busy_timeout_ms", "-1",
	    "[store] busy_timeout_ms: " RLG_T_BUSY_RANGE " (got \"-1\")" },
	{ "store", "busy_timeout_ms", "600001",
	    "[store] busy_timeout_ms: " RLG_T_BUSY_RANGE
	    " (got \"600001\")" },
	{ "store", "busy_timeout_ms", "2s",
	    "[store] busy_timeout_ms: " RLG_T_BUSY_RANGE " (got \"2s\")" },
	{ "store", "busy_timeout_ms", "99999999999999999999",
	    "[store] busy_timeout_ms: " RLG_T_BUSY_RANGE
	    " (got \"99999999999999999999\")" },
	{ "store", "on_error", "Closed",
	    "[store] on_error: must be one of closed, open (got \"Closed\")" },
	{ "store", "on_error", "fail",
	    "[store] on_error: must be one of closed, open (got \"fail\")" },
	{ "headers", "style", "ietf",
	    "[headers] style: \"ietf\" is not supported yet "
	    "(supported: draft03)" },
	{ "headers", "style", "x-ratelimit",
	    "[headers] style: \"x-ratelimit\" is not supported yet "
	    "(supported: draft03)" },
	{ "headers", "style", "all",
	    "[headers] style: \"all\" is not supported yet "
	    "(supported: draft03)" },
	{ "headers", "style", "none",
	    "[headers] style: \"none\" is not supported yet "
	    "(supported: draft03)" },
	{ "headers", "style", "x",
	    "[headers] style: must be one of draft03 (got \"x\")" },
	{ "headers", "style", "DRAFT03",
	    "[headers] style: must be one of draft03 (got \"DRAFT03\")" },
	{ "policy default", "algorithm", "sliding_window",
	    "[policy default] algorithm: \"sliding_window\" is not supported "
	    "yet (supported: fixed_window)" },
	{ "policy default", "algorithm", "token_bucket",
	    "[policy default] algorithm: \"token_bucket\" is not supported "
	    "yet (supported: fixed_window)" },
	{ "policy default", "algorithm", "sliding_log",
	    "[policy default] algorithm: \"sliding_log\" is not supported "
	    "yet (supported: fixed_window)" },
	{ "policy default", "algorithm", "leaky_bucket",
	    "[policy default] algorithm: unknown algorithm "
	    "(got \"leaky_bucket\")" },
	{ "policy default", "algorithm", "Fixed_Window",
	    "[policy default] algorithm: unknown algorithm "
	    "(got \"Fixed_Window\")" },
	{ "policy default", "key", "header:X-Api-Key",
	    "[policy default] key: \"header:X-Api-Key\" is not supported yet "
	    "(supported: ip)" },
	{ "policy default", "key", "header:",
	    "[policy default] key: must be one of ip, header:NAME "
	    "(got \"header:\")" },
	{ "policy default", "key", "IP",
	    "[policy default] key: must be one of ip, header:NAME "
	    "(got \"IP\")" },
	{ "policy default", "limit", "",
	    "[policy default] limit: must not be empty" },
	{ "policy default", "key", "",
	    "[policy default] key: must not be empty" },
	{ "store", "path", "",
	    "[store] path: must not be empty" },
	{ "headers", "style", "",
	    "[headers] style: must not be empty" },
};
#define RLG_T_NBAD (sizeof rlg_t_bad_values / sizeof rlg_t_bad_values[0])

/* The example config of DESIGN.md, verbatim. */
static const char rlg_t_design_example[] =
    "[store]\n"
    "path = /var/lib/rlgate/rlgate.db   ; SQLite file, created with its "
    "schema on first use\n"
    "busy_timeout_ms = 2000\n"
    "on_error = closed                  ; closed: 503 + Retry-After; open: "
    "let requests through\n"
    "\n"
    "[headers]\n"
    "style = draft03                    ; draft03 | ietf | x-ratelimit | "
    "all | none\n"
    "\n"
    "[policy default]\n"
    "algorithm = fixed_window           ; fixed_window | sliding_window | "
    "token_bucket | sliding_log\n"
    "limit = 60                         ; requests per window\n"
    "window = 60                        ; seconds\n"
    "key = ip                           ; ip | header:NAME\n";

/* A newly allocated string, formatted. */
static char *
rlg_t_fmt(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	ck_assert_int_ge(n, 0);
	s = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(s);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* n times c, as a new string. */
static char *
rlg_t_repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/*
 * Loads text as "t.conf"; returns what was written to errs (caller frees),
 * the count in *n and the config in *cfg.
 */
static char *
rlg_t_load(const char *text, int *n, struct rlg_config **cfg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *errs;

	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	*cfg = (struct rlg_config *)&len;     /* must be overwritten */
	*n = rlg_config_load_string(text, "t.conf", errs, cfg);
	fclose(errs);
	ck_assert_ptr_nonnull(buf);
	return buf;
}

/* text must fail with exactly count problems, printed exactly as want. */
static void
rlg_t_expect(const char *text, int count, const char *want)
{
	struct rlg_config *cfg;
	char *errs;
	int n;

	errs = rlg_t_load(text, &n, &cfg);
	ck_assert_str_eq(errs, want);
	ck_assert_int_eq(n, count);
	ck_assert_ptr_null(cfg);
	free(errs);
}

/* text must load with no problem at all; returns the config. */
static struct rlg_config *
rlg_t_ok(const char *text)
{
	struct rlg_config *cfg;
	char *errs;
	int n;

	errs = rlg_t_load(text, &n, &cfg);
	ck_assert_str_eq(errs, "");
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_nonnull(cfg);
	free(errs);
	return cfg;
}

/* Where the temporary files go: $TMPDIR, else /tmp. */
static const char *
rlg_t_tmpdir(void)
{
	const char *dir = getenv("TMPDIR");

	return dir != NULL && *dir != '\0' ? dir : "/tmp";
}

/* Writes len bytes of content to a new temporary file; returns its path. */
static char *
rlg_t_file(const char *content, size_t len)
{
	char *path;
	int fd;

	path = rlg_t_fmt("%s/check_config.XXXXXX", rlg_t_tmpdir());
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
	return path;
}

/* ---- core --------------------------------------------------------------- */

START_TEST(test_defaults)
{
	struct rlg_config *cfg = rlg_config_defaults();

	ck_assert_ptr_null(cfg->source);
	ck_assert_str_eq(cfg->store.path, RLG_DEFAULT_DB_PATH);
	ck_assert_str_eq(cfg->store.path, LOCALSTATEDIR "/lib/rlgate/rlgate.db");
	ck_assert_int_eq(cfg->store.busy_timeout_ms, 2000);
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_CLOSED);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "default");
	ck_assert_int_eq(cfg->policies[0].algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(cfg->policies[0].limit, 60);
	ck_assert_int_eq(cfg->policies[0].window_ms, 60000);
	ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_empty_file_is_defaults)
{
	struct rlg_config *cfg = rlg_t_ok("");

	ck_assert_str_eq(cfg->source, "t.conf");
	ck_assert_str_eq(cfg->store.path, RLG_DEFAULT_DB_PATH);
	ck_assert_int_eq(cfg->store.busy_timeout_ms, 2000);
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "default");
	ck_assert_int_eq(cfg->policies[0].limit, 60);
	ck_assert_int_eq(cfg->policies[0].window_ms, 60000);
	rlg_config_free(cfg);

	cfg = rlg_t_ok("\n\n   \n; only a comment\n# and another\n");
	ck_assert_int_eq(cfg->policies[0].limit, 60);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_full_file)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "[store]\n"
	    "path = /srv/rl/state.db\n"
	    "busy_timeout_ms = 600000\n"
	    "on_error = open\n"
	    "[headers]\n"
	    "style = draft03\n"
	    "[policy default]\n"
	    "algorithm = fixed_window\n"
	    "limit = 1000000000\n"
	    "window = 31622400\n"
	    "key = ip\n");

	ck_assert_str_eq(cfg->source, "t.conf");
	ck_assert_str_eq(cfg->store.path, "/srv/rl/state.db");
	ck_assert_int_eq(cfg->store.busy_timeout_ms, 600000);
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_OPEN);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	ck_assert_uint_eq(cfg->npolicies, 1);
	ck_assert_str_eq(cfg->policies[0].name, "default");
	ck_assert_int_eq(cfg->policies[0].algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(cfg->policies[0].limit, 1000000000);
	ck_assert_int_eq(cfg->policies[0].window_ms, 31622400LL * 1000);
	ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);
	rlg_config_free(cfg);

	/* The low ends of the ranges. */
	cfg = rlg_t_ok("[store]\nbusy_timeout_ms = 0\n"
	    "[policy default]\nlimit = 1\nwindow = 1\n");
	ck_assert_int_eq(cfg->store.busy_timeout_ms, 0);
	ck_assert_int_eq(cfg->policies[0].limit, 1);
	ck_assert_int_eq(cfg->policies[0].window_ms, 1000);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_inline_comments)
{
	struct rlg_config *cfg = rlg_t_ok(
	    "; a comment line\n"
	    "# another kind\n"
	    "   ; an indented one\n"
	    "[store] ; the store\n"
	    "path = /a;b/c.db ; a ';' inside a value stays\n"
	    "on_error = open\t; after a tab\n"
	    "[policy default]\n"
	    "limit = 5 ; five\n"
	    "window = 7 ;seven\n");

	ck_assert_str_eq(cfg->store.path, "/a;b/c.db");
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_OPEN);
	ck_assert_int_eq(cfg->policies[0].limit, 5);
	ck_assert_int_eq(cfg->policies[0].window_ms, 7000);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_design_example)
{
	struct rlg_config *cfg = rlg_t_ok(rlg_t_design_example);

	ck_assert_str_eq(cfg->store.path, "/var/lib/rlgate/rlgate.db");
	ck_assert_int_eq(cfg->store.busy_timeout_ms, 2000);
	ck_assert_int_eq(cfg->store.on_error, RLG_ON_ERROR_CLOSED);
	ck_assert_int_eq(cfg->style, RLG_STYLE_DRAFT03);
	ck_assert_int_eq(cfg->policies[0].algorithm, RLG_ALG_FIXED_WINDOW);
	ck_assert_int_eq(cfg->policies[0].limit, 60);
	ck_assert_int_eq(cfg->policies[0].window_ms, 60000);
	ck_assert_int_eq(cfg->policies[0].key, RLG_KEY_IP);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_layout)
{
	/* CRLF, tabs, indented keys (no continuation lines), a BOM,
	 * "key=value" without spaces, '=' inside a value, and a repeated
	 * section merged into the first. */
	struct rlg_config *cfg = rlg_t_ok(
	    "\xEF\xBB\xBF[store]\r\n"
	    "\tpath=/x=y.db\r\n"
	    "  [policy\t default ]\r\n"
	    "    limit = 9\r\n"
	    "[store]\n"
	    "\t busy_timeout_ms\t=\t17 \n"
	    "[policy default]\n"
	    "window = 3");

	ck_assert_str_eq(cfg->store.path, "/x=y.db");
	ck_assert_int_eq(cfg->store.busy_timeout_ms, 17);
	ck_assert_int_eq(cfg->policies[0].limit, 9);
	ck_assert_int_eq(cfg->policies[0].window_ms, 3000);
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_long_lines_fit)
{
	struct rlg_config *cfg;
	char *pad, *path, *text;

	/* A line of exactly RLG_CONFIG_LINE_MAX bytes, with "\n", "\r\n"
	 * or nothing after it, is fine. */
	pad = rlg_t_repeat('x', RLG_CONFIG_LINE_MAX - 2);
	text = rlg_t_fmt("; %s\n; %s\r\n[store]\n; %s", pad, pad, pad);
	cfg = rlg_t_ok(text);
	ck_assert_str_eq(cfg->store.path, RLG_DEFAULT_DB_PATH);
	rlg_config_free(cfg);
	free(text);
	free(pad);

	/* The longest path. */
	path = rlg_t_repeat('p', 4095);
	text = rlg_t_fmt("[store]\npath = %s\n", path);
	cfg = rlg_t_ok(text);
	ck_assert_str_eq(cfg->store.path, path);
	rlg_config_free(cfg);
	free(text);
	free(path);
}
END_TEST

START_TEST(test_load_string_name)
{
	struct rlg_config *cfg = NULL;

	ck_assert_int_eq(rlg_config_load_string("[store]\npath = /p\n", NULL,
	    NULL, &cfg), 0);
	ck_assert_ptr_nonnull(cfg);
	ck_assert_str_eq(cfg->source, "<string>");
	ck_assert_str_eq(cfg->store.path, "/p");
	rlg_config_free(cfg);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(rlg_on_error_name(RLG_ON_ERROR_CLOSED), "closed");
	ck_assert_str_eq(rlg_on_error_name(RLG_ON_ERROR_OPEN), "open");
	ck_assert_str_eq(rlg_style_name(RLG_STYLE_DRAFT03), "draft03");
	rlg_config_free(NULL);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(test_bad_value)
{
	const struct rlg_t_bad *b = &rlg_t_bad_values[_i];
	char *text, *want;

	text = rlg_t_fmt("[%s]\n%s = %s\n", b->section, b->key, b->value);
	want = rlg_t_fmt("t.conf:2: %s\n", b->msg);
	rlg_t_expect(text, 1, want);
	free(want);
	free(text);
}
END_TEST

START_TEST(test_many_errors)
{
	rlg_t_expect(
	    "key0 = 1\n"                    /* 1 */
	    "[store]\n"                     /* 2 */
	    "pth = /x\n"                    /* 3 */
	    "busy_timeout_ms = 60s\n"       /* 4 */
	    "on_error = Closed\n"           /* 5 */
	    "[headers]\n"                   /* 6 */
	    "style = ietf\n"                /* 7 */
	    "what is this\n"                /* 8 */
	    "[policy default]\n"            /* 9 */
	    "limit = 0\n"                   /* 10 */
	    "limit = 5\n"                   /* 11 */
	    "window =\n"                    /* 12 */
	    "key = header:X-Api-Key\n"      /* 13 */
	    "[policy api]\n"                /* 14 */
	    "limit = 5\n"                   /* 15: in a bad section */
	    "[foo]\n"                       /* 16 */
	    "bar = 1\n"                     /* 17: in a bad section */
	    "[store\n"                      /* 18 */
	    "path = /y\n"                   /* 19: in a bad section */
	    "nonsense",                     /* 20, no newline */
	    14,
	    "t.conf:1: key \"key0\" before any [section]\n"
	    "t.conf:3: [store] unknown key \"pth\"\n"
	    "t.conf:4: [store] busy_timeout_ms: must be an integer from 0 to "
	    "600000 (got \"60s\")\n"
	    "t.conf:5: [store] on_error: must be one of closed, open "
	    "(got \"Closed\")\n"
	    "t.conf:7: [headers] style: \"ietf\" is not supported yet "
	    "(supported: draft03)\n"
	    "t.conf:8: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"what is this\")\n"
	    "t.conf:10: [policy default] limit: must be an integer from 1 to "
	    "1000000000 (got \"0\")\n"
	    "t.conf:11: [policy default] limit: set twice (first on line 10)\n"
	    "t.conf:12: [policy default] window: must not be empty\n"
	    "t.conf:13: [policy default] key: \"header:X-Api-Key\" is not "
	    "supported yet (supported: ip)\n"
	    "t.conf:14: unsupported section [policy api]: only "
	    "[policy default] is supported in this version\n"
	    "t.conf:16: unknown section [foo]\n"
	    "t.conf:18: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"[store\")\n"
	    "t.conf:20: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"nonsense\")\n");
}
END_TEST

START_TEST(test_syntax_errors)
{
	const char *head = "syntax error: expected \"key = value\" or "
	    "\"[section]\" (got ";
	char *want;

	want = rlg_t_fmt(
	    "t.conf:2: %s\"just words\")\n"
	    "t.conf:3: %s\"= value\")\n"
	    "t.conf:4: %s\"[headers\")\n"
	    "t.conf:6: %s\"[store] path = /x\")\n"
	    "t.conf:8: %s\"[store ; comment]\")\n"
	    "t.conf:9: %s\"also bad ; with a comment\")\n",
	    head, head, head, head, head, head);
	rlg_t_expect(
	    "[store]\n"
	    "just words\n"
	    "= value\n"
	    "[headers\n"
	    "[headers] ; a comment after a header is fine\n"
	    "[store] path = /x\n"
	    "[store]#fine too\n"
	    "[store ; comment]\n"
	    "also bad ; with a comment\n",
	    6, want);
	free(want);
}
END_TEST

START_TEST(test_no_continuation_lines)
{
	/* An indented line is a line of its own, never a continuation. */
	rlg_t_expect(
	    "[store]\n"
	    "path = /a\n"
	    "  /continued\n",
	    1,
	    "t.conf:3: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"/continued\")\n");
	rlg_t_expect(
	    "[store]\n"
	    "path = /a\n"
	    "  path = /b\n",
	    1,
	    "t.conf:3: [store] path: set twice (first on line 2)\n");
}
END_TEST

START_TEST(test_overlong_line)
{
	char *pad, *text, *want;

	/* One byte over: with '\n', with "\r\n", at the end of the text;
	 * the lines after each one keep their numbers. */
	pad = rlg_t_repeat('x', RLG_CONFIG_LINE_MAX - 1);
	text = rlg_t_fmt(
	    "[store]\n"
	    "; %s\n"
	    "bogus\n"
	    "path = %s\r\n"
	    "[nope]\n"
	    "path = /ok\n"
	    "; %s",
	    pad, pad, pad);
	want = rlg_t_fmt(
	    "t.conf:2: line too long (max %d bytes)\n"
	    "t.conf:3: syntax error: expected \"key = value\" or "
	    "\"[section]\" (got \"bogus\")\n"
	    "t.conf:4: line too long (max %d bytes)\n"
	    "t.conf:5: unknown section [nope]\n"
	    "t.conf:7: line too long (max %d bytes)\n",
	    RLG_CONFIG_LINE_MAX, RLG_CONFIG_LINE_MAX, RLG_CONFIG_LINE_MAX);
	rlg_t_expect(text, 5, want);
	free(want);
	free(text);
	free(pad);

	/* Far over: the rest of the line is skipped, not read as lines. */
	pad = rlg_t_repeat('y', 5 * RLG_CONFIG_LINE_MAX);
	text = rlg_t_fmt("[store]\npath = %s\nbusy_timeout_ms = x\n", pad);
	want = rlg_t_fmt(
	    "t.conf:2: line too long (max %d bytes)\n"
	    "t.conf:3: [store] busy_timeout_ms: must be an integer from 0 to "
	    "600000 (got \"x\")\n", RLG_CONFIG_LINE_MAX);
	rlg_t_expect(text, 2, want);
	free(want);
	free(text);
	free(pad);
}
END_TEST

START_TEST(test_path_too_long)
{
	char *path, *text;

	path = rlg_t_repeat('p', 4096);
	text = rlg_t_fmt("[store]\npath = %s\n", path);
	rlg_t_expect(text, 1, "t.conf:2: [store] path: must be at most 4095 "
	    "bytes long (got 4096 bytes)\n");
	free(text);
	free(path);
}
END_TEST

START_TEST(test_duplicate_key)
{
	rlg_t_expect(
	    "[store]\n"
	    "\n"
	    "path = /a\n"
	    "[policy default]\n"
	    "limit = 1\n"
	    "[store]\n"
	    "busy_timeout_ms = 1\n"
	    "path = /b\n"
	    "[policy default]\n"
	    "limit = 2\n"
	    "limit = 3\n",
	    3,
	    "t.conf:8: [store] path: set twice (first on line 3)\n"
	    "t.conf:10: [policy default] limit: set twice (first on line 5)\n"
	    "t.conf:11: [policy default] limit: set twice (first on line 5)\n");
	/* A bad first value still counts as set. */
	rlg_t_expect(
	    "[headers]\nstyle = none\nstyle = draft03\n",
	    2,
	    "t.conf:2: [headers] style: \"none\" is not supported yet "
	    "(supported: draft03)\n"
	    "t.conf:3: [headers] style: set twice (first on line 2)\n");
}
END_TEST

START_TEST(test_unknown_section_and_key)
{
	rlg_t_expect(
	    "[foo]\n"
	    "[Store]\n"
	    "[]\n"
	    "[policyx]\n"
	    "[store]\n"
	    "pth = /x\n"
	    "Path = /x\n"
	    "[headers]\n"
	    "styles = draft03\n"
	    "[policy default]\n"
	    "limits = 5\n"
	    "path = /x\n",
	    9,
	    "t.conf:1: unknown section [foo]\n"
	    "t.conf:2: unknown section [Store]\n"
	    "t.conf:3: unknown section []\n"
	    "t.conf:4: unknown section [policyx]\n"
	    "t.conf:6: [store] unknown key \"pth\"\n"
	    "t.conf:7: [store] unknown key \"Path\"\n"
	    "t.conf:9: [headers] unknown key \"styles\"\n"
	    "t.conf:11: [policy default] unknown key \"limits\"\n"
	    "t.conf:12: [policy default] unknown key \"path\"\n");
	rlg_t_expect("limit = 5\n; c\n[store]\n", 1,
	    "t.conf:1: key \"limit\" before any [section]\n");
}
END_TEST

START_TEST(test_policy_sections)
{
	rlg_t_expect(
	    "[policy]\n"
	    "limit = 5\n"
	    "[policy   ]\n"
	    "[policy api]\n"
	    "[policy Default]\n"
	    "[policy\tdefault]\n"
	    "limit = 7\n",
	    4,
	    "t.conf:1: section [policy] has no name (expected [policy NAME])\n"
	    "t.conf:3: section [policy] has no name (expected [policy NAME])\n"
	    "t.conf:4: unsupported section [policy api]: only "
	    "[policy default] is supported in this version\n"
	    "t.conf:5: unsupported section [policy Default]: only "
	    "[policy default] is supported in this version\n");
}
END_TEST

START_TEST(test_errs_null)
{
	struct rlg_config *cfg = NULL;

	ck_assert_int_eq(rlg_config_load_string(
	    "[store]\nbusy_timeout_ms = -1\n[x]\n", "t.conf", NULL, &cfg), 2);
	ck_assert_ptr_null(cfg);
}
END_TEST

/* ---- files -------------------------------------------------------------- */

START_TEST(test_load_file)
{
	static const char text[] =
	    "[store]\npath = /data/rl.db\n[policy default]\nlimit = 100\n";
	struct rlg_config *cfg = NULL;
	char *path, *buf = NULL;
	size_t len = 0;
	FILE *errs;

	path = rlg_t_file(text, sizeof text - 1);
	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load(path, errs, &cfg), 0);
	fclose(errs);
	unlink(path);
	ck_assert_str_eq(buf, "");
	ck_assert_ptr_nonnull(cfg);
	ck_assert_str_eq(cfg->source, path);
	ck_assert_str_eq(cfg->store.path, "/data/rl.db");
	ck_assert_int_eq(cfg->policies[0].limit, 100);
	ck_assert_int_eq(cfg->policies[0].window_ms, 60000);
	rlg_config_free(cfg);
	free(buf);
	free(path);
}
END_TEST

START_TEST(test_load_file_errors)
{
	/* The messages name the file; a NUL byte spoils only its line;
	 * an overlong line is skipped when read from a file too. */
	static const char head[] = "[store]\npa\0th = /x\nbogus\n";
	struct rlg_config *cfg = NULL;
	char *path, *buf = NULL, *want, *pad, *text;
	size_t len = 0;
	FILE *errs;

	pad = rlg_t_repeat('z', 3 * RLG_CONFIG_LINE_MAX);
	text = malloc(sizeof head - 1 + strlen(pad) + 64);
	ck_assert_ptr_nonnull(text);
	memcpy(text, head, sizeof head - 1);
	len = sizeof head - 1;
	len += (size_t)sprintf(text + len, "%s\nlimit = 5\n[policy default]\n"
	    "window = 60s\n", pad);
	path = rlg_t_file(text, len);

	len = 0;
	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load(path, errs, &cfg), 5);
	fclose(errs);
	unlink(path);
	ck_assert_ptr_null(cfg);
	want = rlg_t_fmt(
	    "%s:2: line holds a NUL byte\n"
	    "%s:3: syntax error: expected \"key = value\" or \"[section]\" "
	    "(got \"bogus\")\n"
	    "%s:4: line too long (max %d bytes)\n"
	    "%s:5: [store] unknown key \"limit\"\n"
	    "%s:7: [policy default] window: must be an integer from 1 to "
	    "31622400 (got \"60s\")\n",
	    path, path, path, RLG_CONFIG_LINE_MAX, path, path);
	ck_assert_str_eq(buf, want);
	free(want);
	free(buf);
	free(text);
	free(pad);
	free(path);
}
END_TEST

START_TEST(test_load_missing)
{
	struct rlg_config *cfg = (struct rlg_config *)&cfg;
	char *buf = NULL;
	size_t len = 0;
	FILE *errs;

	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load("/nonexistent/rlgate.conf", errs,
	    &cfg), 1);
	fclose(errs);
	ck_assert_ptr_null(cfg);
	ck_assert_str_eq(buf, "/nonexistent/rlgate.conf: cannot open: "
	    "No such file or directory\n");
	free(buf);

	ck_assert_int_eq(rlg_config_load("/nonexistent/rlgate.conf", NULL,
	    &cfg), 1);
	ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(test_load_directory)
{
	struct rlg_config *cfg = NULL;
	char *dir, *buf = NULL, *want;
	size_t len = 0;
	FILE *errs;

	dir = rlg_t_fmt("%s/check_config.XXXXXX", rlg_t_tmpdir());
	ck_assert_ptr_nonnull(mkdtemp(dir));
	errs = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(rlg_config_load(dir, errs, &cfg), 1);
	fclose(errs);
	ck_assert_ptr_null(cfg);
	want = rlg_t_fmt("%s: cannot read: Is a directory\n", dir);
	ck_assert_str_eq(buf, want);
	free(want);
	free(buf);
	rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(test_pick)
{
	const char *fallback;

	fallback = access(RLG_DEFAULT_CONFIG_PATH, F_OK) == 0 ?
	    RLG_DEFAULT_CONFIG_PATH : NULL;

	/* --config wins over everything. */
	ck_assert_int_eq(setenv("RLGATE_CONFIG", "/env/rlgate.conf", 1), 0);
	ck_assert_str_eq(rlg_config_pick("/opt/rlgate.conf"),
	    "/opt/rlgate.conf");
	/* Then the environment. */
	ck_assert_str_eq(rlg_config_pick(NULL), "/env/rlgate.conf");
	/* An empty variable counts as unset. */
	ck_assert_int_eq(setenv("RLGATE_CONFIG", "", 1), 0);
	if (fallback == NULL)
		ck_assert_ptr_null(rlg_config_pick(NULL));
	else
		ck_assert_str_eq(rlg_config_pick(NULL), fallback);
	/* Then SYSCONFDIR/rlgate.conf if it exists, else built-in. */
	ck_assert_int_eq(unsetenv("RLGATE_CONFIG"), 0);
	if (fallback == NULL)
		ck_assert_ptr_null(rlg_config_pick(NULL));
	else
		ck_assert_str_eq(rlg_config_pick(NULL), fallback);
	ck_assert_str_eq(rlg_config_pick("/opt/rlgate.conf"),
	    "/opt/rlgate.conf");
}
END_TEST

Suite *
rlg_config_suite(void)
{
	Suite *s;
	TCase *tc;

	s = suite_create("config");

	tc = tcase_create("core");
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_empty_file_is_defaults);
	tcase_add_test(tc, test_full_file);
	tcase_add_test(tc, test_inline_comments);
	tcase_add_test(tc, test_design_example);
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_long_lines_fit);
	tcase_add_test(tc, test_load_string_name);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_loop_test(tc, test_bad_value, 0, (int)RLG_T_NBAD);
	tcase_add_test(tc, test_many_errors);
	tcase_add_test(tc, test_syntax_errors);
	tcase_add_test(tc, test_no_continuation_lines);
	tcase_add_test(tc, test_overlong_line);
	tcase_add_test(tc, test_path_too_long);
	tcase_add_test(tc, test_duplicate_key);
	tcase_add_test(tc, test_unknown_section_and_key);
	tcase_add_test(tc, test_policy_sections);
	tcase_add_test(tc, test_errs_null);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_test(tc, test_load_file);
	tcase_add_test(tc, test_load_file_errors);
	tcase_add_test(tc, test_load_missing);
	tcase_add_test(tc, test_load_directory);
	tcase_add_test(tc, test_pick);
	suite_add_tcase(s, tc);

	return s;
}
