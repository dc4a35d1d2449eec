#!/usr/bin/env bash
# sf_headers.sh: the ietf style's fields as a third party reads them.
# rlgate behind lighttpd (the shipped demo), [headers] style = ietf and
# then all, two policies: bucket (token_bucket 10 per 10 s, burst 3: a
# token every second) and log (sliding_log 4 per 20 s). One client sends
# a request, waits 2 s (the bucket refills, the log keeps its entry), then
# requests back to back until a 429. Every RateLimit-Policy and RateLimit
# field (all the lines of each, joined as RFC 9110 says) is parsed by the
# npm package structured-headers (parseList, RFC 8941/9651), not by
# rlgate's own parser, and must be a List of Items whose values are
# strings with Integer parameters: q and w (Policy, and rlgate-burst for
# the bucket), r and t (RateLimit). Then, draft-11's t:
#   - bucket, on every 200: 1, the next token (T = 1 s), even when its
#     whole burst is 3 s away (style all: RateLimit-Reset says 3 when it
#     reports the bucket with nothing left);
#   - log, on every 200: when its oldest entry (the first request) leaves
#     the window, 20 s after it was sent: from the client's clock, between
#     ceil((sent1 + 20000 - back) / 1000) and ceil((back1 + 20000 - sent)
#     / 1000), i.e. 18 after the 2 s pause, where the whole log is back
#     only in 20 (RateLimit-Reset, style all);
#   - on the 429: the rejecting policies only, each t <= Retry-After.
# node and structured-headers are installed by scripts/deps.sh (into
# /usr/local/lib/rlgate-node, or $RLGATE_NODE_DIR): without them the test
# fails, it does not skip.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi curl

NODE_DIR=${RLGATE_NODE_DIR:-/usr/local/lib/rlgate-node}
command -v node >/dev/null 2>&1 ||
	bail_out "node is not installed: run scripts/deps.sh (the test set installs nodejs)"
export NODE_PATH="$NODE_DIR/node_modules"
node -e 'require("structured-headers")' 2>"$T/node.err" ||
	bail_out "the npm package structured-headers is not in $NODE_PATH: run scripts/deps.sh (it installs it there): $(head -2 "$T/node.err")"

# sf.js HEADERS: the RateLimit-Policy and RateLimit fields of the header
# block in HEADERS, parsed by structured-headers and checked as the
# draft's Lists; prints "policy NAME q w [burst]" and "rl NAME r t", one
# line per member, or fails with "sf: ..." on stderr.
cat >"$T/sf.js" <<'EOF'
"use strict";
const sh = require("structured-headers");
const fs = require("fs");
const lines = fs.readFileSync(process.argv[2], "latin1").split(/\r?\n/);
function field(name) {
  const v = [];
  for (const l of lines) {
    const i = l.indexOf(":");
    if (i > 0 && l.slice(0, i).toLowerCase() === name.toLowerCase())
      v.push(l.slice(i + 1).trim());
  }
  return v.length ? v.join(", ") : null;
}
function fail(msg) {
  process.stderr.write("sf: " + msg + "\n");
  process.exit(1);
}
function members(name, want, allowed) {
  const raw = field(name);
  if (raw === null)
    return [];
  let list;
  try {
    list = sh.parseList(raw);
  } catch (e) {
    fail(name + ": not a structured List (" + e.message + "): " + raw);
  }
  return list.map(([value, params]) => {
    if (Array.isArray(value))
      fail(name + ": an Inner List, not an Item: " + raw);
    if (typeof value !== "string")
      fail(name + ": a member is not a String: " + raw);
    for (const k of params.keys())
      if (!allowed.includes(k))
        fail(name + ": unexpected parameter " + k + ": " + raw);
    const out = [value];
    for (const k of allowed) {
      const v = params.get(k);
      if (v === undefined) {
        if (want.includes(k))
          fail(name + ": " + value + " has no parameter " + k + ": " + raw);
        continue;
      }
      if (!Number.isInteger(v) || v < 0)
        fail(name + ": " + value + ";" + k + " is not a non-negative Integer: " + raw);
      out.push(v);
    }
    return out;
  });
}
for (const m of members("RateLimit-Policy", ["q", "w"], ["q", "w", "rlgate-burst"]))
  console.log("policy " + m.join(" "));
for (const m of members("RateLimit", ["r", "t"], ["r", "t"]))
  console.log("rl " + m.join(" "));
EOF

make_rundir

# sf NAME: the parsed fields of the answer kept under NAME; fails the
# test (and prints nothing) when structured-headers refuses them.
sf() {
	if node "$T/sf.js" "$T/keep.$1.headers" >"$T/sf.$1" 2>"$T/sf.$1.err"; then
		pass "$STYLE $1: RateLimit-Policy and RateLimit are Lists of Items, strings with Integer parameters (structured-headers)"
	else
		fail "$STYLE $1: structured-headers refuses the fields: $(cat "$T/sf.$1.err")"
		: >"$T/sf.$1"
	fi
}

# rl NAME POLICY: "r t" of POLICY in RateLimit of the answer NAME.
rl() {
	awk -v p="$2" '$1 == "rl" && $2 == p { print $3, $4 }' "$T/sf.$1"
}

ceil_s() { echo $((($1 + 999) / 1000)); }

WINDOW_LOG=20
demo_lighttpd_conf
n=0
for STYLE in ietf all; do
	n=$((n + 1))
	cat >"$T/$STYLE.conf" <<EOF
; written by $(basename "$0")
[store]
path = $run/$STYLE.db

[headers]
style = $STYLE

[policy bucket]
algorithm = token_bucket
limit = 10
window = 10
burst = 3

[policy log]
algorithm = sliding_log
limit = 4
window = $WINDOW_LOG
EOF
	[ $n -gt 1 ] && stop_rlgate_fcgi "rlgate-$((n - 1))"
	start_rlgate_fcgi "rlgate-$n" "$sock" "$T/$STYLE.conf" 1
	[ $n -eq 1 ] && start_lighttpd "$T/lighttpd.conf" "$PORT"
	CL=127.0.0.$((80 + n))

	# The first request; 2 s later, back to back until a 429 (at most 6).
	SENT1=$(now_ms)
	keep r1 --interface "$CL" "$url"
	BACK1=$(now_ms)
	sleep 2
	SENT=$(now_ms)
	keep_burst "$CL" r2 r3 r4 r5 r6 r7
	BACK=$(now_ms)
	recall r1
	is "$STATUS" 200 "$STYLE: the first request: 200"

	sf r1
	is "$(awk '$1 == "policy" { $1 = ""; print }' "$T/sf.r1" | sed 's/^ //' | tr '\n' ';')" \
	    "bucket 10 10 3;log 4 $WINDOW_LOG;" \
	    "$STYLE: RateLimit-Policy: \"bucket\";q=10;w=10;rlgate-burst=3, \"log\";q=4;w=$WINDOW_LOG"
	is "$(rl r1 bucket)" "2 1" "$STYLE r1: bucket r=2 t=1 (the next token)"
	is "$(rl r1 log)" "3 $WINDOW_LOG" "$STYLE r1: log r=3 t=$WINDOW_LOG (the request itself leaves the window last)"

	# The log's oldest entry is r1: t counts down from its 20 s.
	lo=$(ceil_s $((SENT1 + WINDOW_LOG * 1000 - BACK)))
	hi=$(ceil_s $((BACK1 + WINDOW_LOG * 1000 - SENT)))
	rejected=
	for k in r2 r3 r4 r5 r6 r7; do
		recall "$k"
		if [ "$STATUS" = 429 ]; then
			rejected=$k
			break
		fi
		is "$STATUS" 200 "$STYLE $k: 200 before the 429"
		sf "$k"
		read -r r t <<<"$(rl "$k" bucket)"
		is "${t:-}" 1 "$STYLE $k: bucket t=1, the next token (r=${r:-?})"
		read -r r t <<<"$(rl "$k" log)"
		between "${t:-0}" "$lo" "$hi" "$STYLE $k: log t=${t:-?}: r1's expiry, $lo..$hi s (not the whole window's $WINDOW_LOG) (r=${r:-?})"
		if [ "$STYLE" = all ] && [ "$(header RateLimit-Limit)" = 10 ]; then
			# draft03's Reset (the bucket reported): its whole burst.
			between "$(header RateLimit-Reset)" 1 3 \
			    "all $k: RateLimit-Reset $(header RateLimit-Reset) (the whole bucket) >= t=1"
		fi
		if [ "$STYLE" = all ] && [ "$(header RateLimit-Limit)" = 4 ]; then
			is "$(header RateLimit-Reset)" $WINDOW_LOG \
			    "all $k: RateLimit-Reset $WINDOW_LOG (the whole log) where t=${t:-?}"
		fi
	done
	ok "$([ -n "$rejected" ]; echo $?)" "$STYLE: a 429 within 6 requests (${rejected:-none})"
	[ -n "$rejected" ] || continue
	sf "$rejected"
	ra=$(header Retry-After)
	like "$ra" '^[1-9][0-9]*$' "$STYLE $rejected: Retry-After $ra, delta seconds"
	members=$(awk '$1 == "rl"' "$T/sf.$rejected" | wc -l)
	ok "$([ "$members" -ge 1 ]; echo $?)" "$STYLE $rejected: RateLimit lists the rejecting policies ($members)"
	while read -r _ name r t; do
		is "$r" 0 "$STYLE $rejected: $name r=0"
		between "$t" 1 "$ra" "$STYLE $rejected: $name t=$t <= Retry-After $ra"
	done < <(awk '$1 == "rl"' "$T/sf.$rejected")
done

done_testing
