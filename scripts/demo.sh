#!/usr/bin/env bash
# The demo: installs what is missing, builds rlgate, and starts
# lighttpd + spawn-fcgi + rlgate on 127.0.0.1:8080 with its SQLite file in
# ./demo/. `scripts/demo.sh stop` stops it, `scripts/demo.sh status` shows
# it. The demo's policy: a fixed window of 5 requests per 60 s per client.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
run="$top/demo"
port=${RLGATE_DEMO_PORT:-8080}

stop() {
	local f pid
	for f in "$run"/lighttpd.pid "$run"/rlgate.pids; do
		[ -f "$f" ] || continue
		while read -r pid || [ -n "$pid" ]; do
			[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
		done < "$f"
		rm -f "$f"
	done
	rm -f "$run/rlgate.sock"
}

case "${1:-start}" in
stop)
	stop
	echo "demo stopped"
	exit 0
	;;
status)
	for f in "$run"/lighttpd.pid "$run"/rlgate.pids; do
		name=$(basename "$f")
		name=${name%%.*}        # lighttpd.pid, rlgate.pids: the program
		[ -f "$f" ] && while read -r pid || [ -n "$pid" ]; do
			kill -0 "$pid" 2>/dev/null && echo "running: $name pid $pid"
		done < "$f"
	done
	exit 0
	;;
start) ;;
*)
	echo "usage: scripts/demo.sh [start|stop|status]" >&2
	exit 64
	;;
esac

bash scripts/deps.sh demo
build=$(bash scripts/build.sh normal)
stop
mkdir -p "$run"

cat > "$run/rlgate.conf" <<CONF
; The demo's rlgate config (written by scripts/demo.sh).
[store]
path = $run/rlgate.db
busy_timeout_ms = 2000
on_error = closed

[headers]
style = draft03

[policy default]
algorithm = fixed_window
limit = 5
window = 60
key = ip
CONF
"$build/app/rlgate" --config "$run/rlgate.conf" --check-config

spawn-fcgi -s "$run/rlgate.sock" -M 0600 -F 2 -P "$run/rlgate.pids" \
	-- "$build/app/rlgate" --config "$run/rlgate.conf" --threads 2 \
	--log "$run/rlgate.log" >/dev/null

cat > "$run/lighttpd.conf" <<CONF
# The demo's lighttpd config (written by scripts/demo.sh): sets the
# variables the shipped www/lighttpd/demo.conf reads, then includes it.
var.rlgate_root = "$top/www"
var.rlgate_run = "$run"
var.rlgate_socket = "$run/rlgate.sock"
server.port = $port
include "$top/www/lighttpd/demo.conf"
CONF
lighttpd -tt -f "$run/lighttpd.conf" >/dev/null
lighttpd -f "$run/lighttpd.conf"

for _ in $(seq 50); do
	curl -s -o /dev/null "http://127.0.0.1:$port/" && break
	sleep 0.1
done

cat <<MSG

rlgate demo running: lighttpd on http://127.0.0.1:$port/ -> spawn-fcgi (2 processes x 2 threads) -> rlgate
  config:   $run/rlgate.conf (5 requests per 60 s window per client)
  database: $run/rlgate.db (decided in $run/rlgate.db-table, written behind every second)
  logs:     $run/rlgate.log, $run/lighttpd-error.log
  status:   http://127.0.0.1:$port/ (the live status page; how a fixed window works: /about.html)

Try it:
  curl -i http://127.0.0.1:$port/api/v1/resources
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' http://127.0.0.1:$port/api/v1/resources; done; echo
  curl -i http://127.0.0.1:$port/api/v1/resources          # 429 with Retry-After
  curl -i --interface 127.0.0.2 http://127.0.0.1:$port/api/v1/resources   # another client
  curl -s http://127.0.0.1:$port/rlgate/metrics | grep rlgate_requests_total   # the counts, for Prometheus
  sqlite3 $run/rlgate.db 'SELECT * FROM clients'          # written behind: about 1 s old

Stop it with: bash scripts/demo.sh stop
MSG
