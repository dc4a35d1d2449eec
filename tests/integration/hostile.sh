#!/usr/bin/env bash
# hostile.sh: hostile requests over real HTTP, lighttpd + spawn-fcgi (2
# processes, 2 threads): huge headers, NUL and CR/LF bytes, non-UTF-8
# paths, very long API keys and forwarding headers, odd methods, raw
# requests written byte by byte. Whatever lighttpd lets through, rlgate
# answers with clean headers (each line ends in CRLF, no other CR or LF,
# nothing taken from input becomes a header), never crashes, and keeps
# counting exactly. API keys reach the database only as k:HEX.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl head

make_rundir
db="$T/hostile.db"
cat >"$T/rlgate.conf" <<EOF
; written by $(basename "$0")
[store]
path = $db
[client]
trusted_proxies = 127.0.0.1
forwarded_header = x-forwarded-for
key_secret = 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
[policy by_ip]
limit = 1000
window = 3600
key = ip
[policy by_key]
limit = 1000
window = 3600
key = header:X-API-Key
EOF
start_rlgate_fcgi rlgate "$run/rlgate.sock" "$T/rlgate.conf" 2 --threads 2
demo_lighttpd

# clean_headers DESC: the header block of the last answer ($T/last.headers,
# raw) has every line ending in CRLF, no CR inside a line, and no header
# that input tried to inject.
clean_headers() {
	local f="$T/last.headers" bad
	bad=$(LC_ALL=C grep -c -v $'\r$' "$f")
	is "$bad" 0 "$1: every header line ends in CRLF"
	bad=$(LC_ALL=C grep -c $'\r.' "$f")
	is "$bad" 0 "$1: no CR inside a header line"
	bad=$(LC_ALL=C grep -ci '^x-evil' "$f")
	is "$bad" 0 "$1: no injected header"
}

# hostile DESC CURL_ARGS...: one request; any status lighttpd or rlgate
# chooses, but an answer, with clean headers.
hostile() {
	local d=$1
	shift
	req "$@"
	isnt "$STATUS" 000 "$d: answered (HTTP $STATUS)"
	clean_headers "$d"
	[ "$STATUS" = 000 ] || CODES="$CODES $STATUS"
}
CODES=

# ---- paths (lighttpd itself answers 400 to control bytes and some
# invalid sequences in the path; the CGI part below hands them to rlgate)
hostile "CR LF in the path" --path-as-is "$base/api/v1/resources%0d%0aX-Evil:%201"
hostile "NUL in the path" --path-as-is "$base/api/v1/resources%00.json"
hostile "non-UTF-8 path" --path-as-is "$base/api/v1/%c3%28%e2%82%80abc"
is "$STATUS" 404 "non-UTF-8 path: 404 from rlgate"
like "$BODY" '^\{"error":\{"code":404' "non-UTF-8 path: JSON error body"
hostile "overlong dot-dot path" --path-as-is "$base/api/v1/%2e%2e/%2e%2e/etc/passwd"
hostile "7 KiB path" "$base/api/$(head -c 7000 /dev/zero | tr '\0' a)"

# ---- headers
long_key=$(head -c 6000 /dev/zero | tr '\0' k)
hostile "6000-byte API key" -H "X-API-Key: $long_key" "$url"
is "$STATUS" 200 "6000-byte API key: 200"
hostile "API key with CR LF" -H $'X-API-Key: a\r\nX-Evil: 1' "$url"
hostile "API key of bytes 0x80-0xff" -H "X-API-Key: $(printf '\x80\xfe\xff\xc3\x28')" "$url"
is "$STATUS" 200 "non-UTF-8 API key: 200"
xff=$(for i in $(seq 1 600); do printf '10.%d.%d.1, ' $((i / 250)) $((i % 250)); done)
hostile "7 KiB X-Forwarded-For" -H "X-Forwarded-For: ${xff}203.0.113.9" "$url"
is "$STATUS" 200 "7 KiB X-Forwarded-For: 200 (the rightmost hop, 203.0.113.9, is the client)"
hostile "X-Forwarded-For with CR LF" -H $'X-Forwarded-For: 203.0.113.7\r\nX-Evil: 1' "$url"
hostile "garbage X-Forwarded-For" -H "X-Forwarded-For: ]]::zz::[[, 999.1.1.1, -" "$url"
is "$STATUS" 400 "garbage X-Forwarded-For from the trusted peer: 400 (never the peer's key)"
many=()
for i in $(seq 1 100); do many+=(-H "X-Filler-$i: $(head -c 60 /dev/zero | tr '\0' f)"); done
hostile "100 extra headers" "${many[@]}" "$url"
hostile "header over lighttpd's limit (20 KiB)" -H "X-API-Key: $(head -c 20000 /dev/zero | tr '\0' z)" "$url"

# ---- methods
hostile "unknown method" -X FOOBAR "$url"
hostile "lowercase method" -X get "$url"
hostile "64-byte method" -X "$(head -c 64 /dev/zero | tr '\0' M)" "$url"

# ---- raw requests, byte by byte (bash /dev/tcp), each answered or closed
raw() {
	local d=$1 payload=$2 answer
	answer=$(
		exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
		printf '%b' "$payload" >&3
		timeout 5 cat <&3 | head -c 4096 | tr -d '\0'
	)
	ok $? "raw: $d: the connection works"
	unlike "$answer" $'\nX-Evil' "raw: $d: no injected header"
}
raw "NUL in a header" 'GET /api/v1/resources HTTP/1.0\r\nX-API-Key: a\0b\r\n\r\n'
raw "NUL in the request line" 'GET /api/v1/res\0ources HTTP/1.0\r\n\r\n'
raw "bare LF line ends" 'GET /api/v1/resources HTTP/1.0\nX-API-Key: lf\n\n'
raw "obs-fold header" 'GET /api/v1/resources HTTP/1.0\r\nX-API-Key: a\r\n b\r\n\r\n'
raw "HTTP/0.9" 'GET /api/v1/resources\r\n\r\n'
raw "truncated request" 'GET /api/v1/resou'

# ---- CGI mode: the environment straight into rlgate, nothing filtered
cgi_conf="$T/cgi.conf"
sed "s|^path = .*|path = $T/cgi.db|" "$T/rlgate.conf" >"$cgi_conf"
# cgi NAME=VALUE...: rlgate as a CGI program with this environment; its
# header block (raw) in $T/last.headers, STATUS, RC.
cgi() {
	env -i PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 SERVER_PROTOCOL=HTTP/1.1 \
	    REQUEST_METHOD=GET "$@" timeout 10 "$RLGATE_BIN" --config "$cgi_conf" \
	    </dev/null >"$T/cgi.out" 2>"$T/cgi.err"
	RC=$?
	awk '/^\r?$/ { exit } { print }' "$T/cgi.out" >"$T/last.headers"
	STATUS=$(awk '/^Status:/ { print $2; exit }' "$T/last.headers")
	: "${STATUS:=200}"
}
# cgi_hostile DESC NAME=VALUE...: exits 0, clean headers
cgi_hostile() {
	local d=$1
	shift
	cgi "$@"
	is "$RC" 0 "CGI, $d: rlgate exits 0 (HTTP $STATUS)"
	clean_headers "CGI, $d"
}
big=$(head -c 100000 /dev/zero | tr '\0' x)
cgi_hostile "CR LF in REQUEST_URI" REMOTE_ADDR=127.0.0.1 REQUEST_URI=$'/api/v1/resources\r\nX-Evil: 1'
is "$STATUS" 404 "CGI, CR LF in REQUEST_URI: 404"
cgi_hostile "non-UTF-8 REQUEST_URI" REMOTE_ADDR=127.0.0.1 REQUEST_URI=$'/api/v1/\xff\xfe\xc0\xaf'
is "$STATUS" 404 "CGI, non-UTF-8 REQUEST_URI: 404"
cgi_hostile "CR LF in REMOTE_ADDR" REQUEST_URI=/api/v1/resources REMOTE_ADDR=$'127.0.0.1\r\nX-Evil: 1'
cgi_hostile "CR LF in the API key" REQUEST_URI=/api/v1/resources REMOTE_ADDR=127.0.0.1 HTTP_X_API_KEY=$'k\r\nX-Evil: 1'
is "$STATUS" 200 "CGI, CR LF in the API key: 200 (hashed)"
cgi_hostile "CR LF in X-Forwarded-For" REQUEST_URI=/api/v1/resources REMOTE_ADDR=127.0.0.1 HTTP_X_FORWARDED_FOR=$'203.0.113.1\r\nX-Evil: 1'
cgi_hostile "CR LF in the method" REQUEST_URI=/api/v1/resources REMOTE_ADDR=127.0.0.1 REQUEST_METHOD=$'GET\r\nX-Evil: 1'
cgi_hostile "100 KB REQUEST_URI" REMOTE_ADDR=127.0.0.1 REQUEST_URI="/api/$big"
cgi_hostile "100 KB API key" REQUEST_URI=/api/v1/resources REMOTE_ADDR=127.0.0.1 HTTP_X_API_KEY="$big"
is "$STATUS" 200 "CGI, 100 KB API key: 200"
cgi_hostile "100 KB X-Forwarded-For" REQUEST_URI=/api/v1/resources REMOTE_ADDR=127.0.0.1 HTTP_X_FORWARDED_FOR="$big"
is "$STATUS" 400 "CGI, 100 KB X-Forwarded-For from the trusted peer: 400 (never the peer's key)"
cgi_hostile "no REMOTE_ADDR, no REQUEST_URI"
is "$(sql "$T/cgi.db" "SELECT count(*) FROM rlg_state WHERE client GLOB '*xxxxxxxx*' OR client GLOB '*Evil*'")" 0 \
    "CGI: no raw key or injected text in the database"

diag "statuses seen: $(printf '%s\n' $CODES | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')"

# ---- afterwards: the workers live, count exactly, and stored no key
rlgate_pids_alive rlgate
ok $? "both rlgate workers survived every hostile request"
before=$(sql_flushed "$T/rlgate.conf" "$db" "SELECT count FROM rlg_state WHERE policy = 'by_ip' AND client = '127.0.0.1'")
req -H "X-API-Key: after" "$url"
is "$STATUS" 200 "a normal request afterwards: 200"
is "$(header RateLimit-Remaining)" "$((1000 - before - 1))" "... counted exactly after the others (RateLimit-Remaining)"
# by_key rows: k: and 32 hex digits, or the IP fallback of a request
# without the header (the same key as its by_ip row)
flush_table "$T/rlgate.conf"
is "$(sql "$db" "SELECT count(*) FROM rlg_state WHERE policy = 'by_key' AND NOT (client GLOB 'k:[0-9a-f]*' AND length(client) = 34) AND client NOT IN (SELECT client FROM rlg_state WHERE policy = 'by_ip')")" 0 \
    "API keys are stored only as k:HEX"
is "$(sql "$db" "SELECT count(*) FROM rlg_state WHERE client GLOB '*kkkkkkkk*' OR client GLOB '*Evil*'")" 0 \
    "no raw key or injected text in the database"
is "$(sql "$db" 'PRAGMA integrity_check')" ok "PRAGMA integrity_check: ok"
is "$(grep -ci 'evil\|kkkkkkkk' "$T/rlgate.log")" 0 "no raw key or injected text in rlgate's log"

done_testing
