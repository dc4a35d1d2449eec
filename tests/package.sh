#!/usr/bin/env bash
# package.sh: the Debian package, built, installed, used and purged on
# this machine (root; scripts/test.sh runs it once, after make check):
#   1. dpkg-buildpackage -us -uc -b on a copy of the source tree builds
#      rlgate_VERSION_amd64.deb; lintian reports no error and no warning;
#   2. dpkg -i installs /usr/sbin/rlgate, /etc/rlgate/rlgate.conf (a
#      conffile), the systemd units, the man pages, the snippets under
#      /usr/share/rlgate, a logrotate rule; creates the system user rlgate
#      and gives it /var/lib/rlgate; the snippets, example config, man
#      pages and units name those paths (no /usr/local);
#   3. the installed rlgate passes --check-config as rlgate; without
#      systemd the package made /run/rlgate, and rlgate starts there as
#      docs/operations.md says (spawn-fcgi -P /run/rlgate/rlgate.pid, the
#      supervisor as rlgate, --log /var/log/rlgate/rlgate.log) and answers
#      through lighttpd mounted with the packaged snippet, its database in
#      /var/lib/rlgate; the packaged logrotate rule (logrotate -f) moves
#      the log aside and the supervisor, signalled by its pid file, writes
#      its next lines to a new one;
#   3b. every packaged snippet (lighttpd rlgate.conf, authorizer.conf,
#      authorizer-headers.conf, forward_auth.conf; Apache rlgate.conf,
#      authorizer.conf; nginx rlgate.conf + guard.conf; Caddy
#      rlgate.caddy), mounted as its comments say with the packaged config
#      unchanged, answers a flood from one client with a 429 (the servers
#      that are not installed are skipped);
#   4. dpkg --purge leaves nothing behind: files, state, logs, the user.
# Skipped unless root with dpkg-buildpackage, debhelper and lintian, and
# when an rlgate package is installed already (not this test's to touch).
# RLGATE_DEB=FILE installs that package instead of building one (parts 2
# to 4 on another build, e.g. an older one).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${RLGATE_BIN:=/bin/true}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

[ "$(id -u)" -eq 0 ] || skip_all "needs root (dpkg -i)"
for c in dpkg-buildpackage dh lintian spawn-fcgi lighttpd curl setpriv; do
	command -v "$c" >/dev/null || skip_all "$c is not installed (scripts/deps.sh installs it)"
done
if dpkg-query -W -f='${Status}' rlgate 2>/dev/null | grep -q 'ok installed'; then
	skip_all "an rlgate package is installed on this machine already"
fi
make_tmpdir

installed=0
# shellcheck disable=SC2317  # the EXIT trap
purge_on_exit() {
	local rc=$?
	[ "$installed" -eq 1 ] && dpkg --purge rlgate >/dev/null 2>&1
	(exit "$rc")
	_cleanup
}
trap purge_on_exit EXIT

version=$(sed -n 's/^AC_INIT(\[rlgate\], \[\([^]]*\)\].*/\1/p' "$RLGATE_SRCDIR/configure.ac")

# ---- 1. build, lintian -----------------------------------------------------------

if [ -n "${RLGATE_DEB:-}" ]; then
	# a package built before (to try this test on another build): parts
	# 2 to 4 only
	deb=$RLGATE_DEB
	diag "using $deb, not building"
else
	mkdir -p "$T/pkg/src"
	tar -C "$RLGATE_SRCDIR" --exclude=./_build --exclude=./.git --exclude=./demo \
	    --exclude='./rlgate-*' -cf - . | tar -C "$T/pkg/src" -xf - ||
		bail_out "cannot copy the source tree"
	(cd "$T/pkg/src" && timeout 900 dpkg-buildpackage -us -uc -b) >"$T/build.log" 2>&1
	is "$?" 0 "dpkg-buildpackage -us -uc -b: exit 0"
	deb="$T/pkg/rlgate_${version}_amd64.deb"
	ok "$([ -f "$deb" ]; echo $?)" "it builds rlgate_${version}_amd64.deb"
	[ -f "$deb" ] || bail_out "no package: $(tail -20 "$T/build.log")"
	timeout 300 lintian "$deb" >"$T/lintian.out" 2>&1
	grep -v 'running with root privileges' "$T/lintian.out" | sed 's/^/lintian: /' | while read -r l; do diag "$l"; done
	is "$(grep -cE '^[EW]: ' "$T/lintian.out")" 0 "lintian: no error, no warning"
fi

# ---- 2. install --------------------------------------------------------------------

dpkg -i "$deb" >"$T/install.log" 2>&1
rc=$?
installed=1
is "$rc" 0 "dpkg -i: exit 0"
missing=
for f in /usr/sbin/rlgate /etc/rlgate/rlgate.conf /lib/systemd/system/rlgate.service \
    /lib/systemd/system/rlgate.socket /usr/share/man/man8/rlgate.8.gz \
    /usr/share/man/man5/rlgate.conf.5.gz /usr/share/rlgate/www/lighttpd/rlgate.conf \
    /usr/share/rlgate/www/apache/rlgate.conf /etc/logrotate.d/rlgate; do
	[ -f "$f" ] || missing="$missing $f"
done
is "${missing# }" "" "installed: the binary, the config, the units, the man pages, the snippets, logrotate"
like "$(dpkg-query -W -f='${Conffiles}' rlgate)" '/etc/rlgate/rlgate.conf [0-9a-f]{32}' \
    "/etc/rlgate/rlgate.conf is a conffile"
ok "$(getent passwd rlgate >/dev/null; echo $?)" "the system user rlgate exists"
is "$(stat -c '%U:%G %a' /var/lib/rlgate)" "rlgate:rlgate 750" "/var/lib/rlgate is rlgate's, 0750"
is "$(grep '^path = ' /etc/rlgate/rlgate.conf | head -1)" "path = /var/lib/rlgate/rlgate.db" \
    "the config keeps the database in /var/lib/rlgate"
# the texts it installs name the package's paths (made from templates at
# build time), never make install's /usr/local
bad=
while read -r f; do
	[ -f "$f" ] || continue
	case $f in
	*.gz) zcat "$f" 2>/dev/null | grep -q /usr/local && bad="$bad $f" ;;
	*) grep -qI /usr/local "$f" && bad="$bad $f" ;;
	esac
done < <(dpkg -L rlgate)
is "${bad# }" "" "no installed text names /usr/local"
grep -qxF '#        include "/usr/share/rlgate/www/lighttpd/rlgate.conf"' \
    /usr/share/rlgate/www/lighttpd/rlgate.conf
ok $? "the lighttpd snippet says: include \"/usr/share/rlgate/www/lighttpd/rlgate.conf\""
grep -qF "exec /usr/sbin/rlgate" /usr/share/rlgate/www/apache/rlgate.conf
ok $? "the Apache snippet starts /usr/sbin/rlgate"
zcat /usr/share/man/man8/rlgate.8.gz | grep -qxF '.I /etc/rlgate/rlgate.conf'
ok $? "rlgate(8) FILES: /etc/rlgate/rlgate.conf"
grep -qxF 'ExecStart=/usr/sbin/rlgate --config /etc/rlgate/rlgate.conf --processes 2 --threads 4' \
    /lib/systemd/system/rlgate.service
ok $? "rlgate.service runs /usr/sbin/rlgate --config /etc/rlgate/rlgate.conf"

# ---- 3. serve without systemd, as docs/operations.md says ---------------------

setpriv --reuid=rlgate --regid=rlgate --init-groups /usr/sbin/rlgate \
    --config /etc/rlgate/rlgate.conf --check-config >"$T/check.out" 2>&1
is "$?" 0 "as rlgate: --check-config passes (ExecStartPre)"
if [ -d /run/systemd/system ]; then
	# systemd runs here: its rlgate.socket holds the socket; this test
	# starts rlgate the other way
	systemctl stop rlgate.socket rlgate.service >/dev/null 2>&1
else
	is "$(stat -c '%U:%G %a' /run/rlgate 2>&1)" "root:root 755" \
	    "without systemd, the package makes /run/rlgate (root's, 0755)"
fi
ok "$([ -f /usr/lib/tmpfiles.d/rlgate.conf ]; echo $?)" "... and installs its tmpfiles.d entry"
mkdir -p /run/rlgate
chmod 755 "$T"
sock=/run/rlgate/rlgate.sock
pidfile=/run/rlgate/rlgate.pid
rlog=/var/log/rlgate/rlgate.log
spawn-fcgi -s "$sock" -U www-data -G www-data -u rlgate -g rlgate -P "$pidfile" \
    -- /usr/sbin/rlgate --config /etc/rlgate/rlgate.conf --processes 2 \
    --threads 2 --log "$rlog" </dev/null >"$T/spawn.out" 2>&1
is "$?" 0 "spawn-fcgi starts the supervisor on $sock (the package's directory)"
sv=$(cat "$pidfile" 2>/dev/null)
like "$sv" '^[0-9]+$' "... its pid in $pidfile"
track_pid "$sv"
for _ in $(seq 1 50); do
	[ "$(pgrep -P "$sv" | wc -l)" -eq 2 ] && break
	sleep 0.1
done
is "$(ps -o user= -p "$sv" | tr -d ' ')" rlgate "the supervisor runs as rlgate"
is "$(pgrep -P "$sv" | wc -l)" 2 "... with its 2 workers"
PORT=$(free_port) || bail_out "no free port"
mkdir -p "$T/docroot"
write_lighttpd_base "$T/lighttpd.conf" "$PORT" "$T/docroot" "$T/lighttpd.pid" "$T/error.log" <<EOF
var.rlgate_socket = "$sock"
include "/usr/share/rlgate/www/lighttpd/rlgate.conf"
EOF
start_lighttpd "$T/lighttpd.conf" "$PORT"
req "http://127.0.0.1:$PORT/api/v1/resources"
is "$STATUS" 200 "through lighttpd and the packaged snippet: 200"
like "$(header RateLimit-Limit)" '^[0-9]+$' "... with RateLimit-Limit"
req "http://127.0.0.1:$PORT/rlgate/health"
is "$STATUS:$BODY" '200:{"status":"ok"}' "... and /rlgate/health: ok"
is "$(stat -c %U /var/lib/rlgate/rlgate.db 2>/dev/null)" rlgate "the database is in /var/lib/rlgate, rlgate's"

# ---- 3b. every packaged snippet, mounted as its comments say, limits a flood --
# The packaged config as installed; one client address per snippet
# (127.0.0.N: the whole of 127/8 is this machine), so that each flood
# starts from a full quota. FLOOD requests over one connection (one curl,
# --next) is more than the packaged [policy default] lets through at once
# (burst 20, then 10 a second) unless they took over 8 s.
W=/usr/share/rlgate/www
FLOOD=100
flood_client=10
mkdir -p "$T/docroot/static"
echo hello >"$T/docroot/static/hello.txt"
chmod -R a+rX "$T/docroot"
# flood NAME URL [CURL_ARGS...]: the first request of a new client is
# admitted, and FLOOD of them meet the front's refusal (429).
flood() {
	local name=$1 url=$2 i
	local -a args=()
	shift 2
	flood_client=$((flood_client + 1))
	for i in $(seq 1 "$FLOOD"); do
		[ "$i" -gt 1 ] && args+=(--next)
		args+=(-s -o /dev/null --max-time 10 --interface "127.0.0.$flood_client"
		    -w '%{http_code}\n' "$@" "$url")
	done
	timeout 120 curl "${args[@]}" >"$T/flood.$name" 2>&1
	is "$(head -1 "$T/flood.$name")" 200 "$name: a client's first request is admitted"
	ok "$(grep -qx 429 "$T/flood.$name"; echo $?)" \
	    "$name: $FLOOD requests at once from one client meet a 429 ($(sort "$T/flood.$name" | uniq -c | awk '{ printf "%s%s x %s", s, $1, $2; s = ", " }'))"
}

# lighttpd: www/lighttpd/rlgate.conf (the responder at /api/)
flood lighttpd-rlgate.conf "http://127.0.0.1:$PORT/api/v1/resources"
main_lighttpd=$LIGHTTPD_PID

# lighttpd: authorizer.conf guarding /static/, then with
# authorizer-headers.conf (mod_magnet) too
for variant in authorizer authorizer-headers; do
	LPORT=$(free_port) || bail_out "no free port"
	{
		echo "var.rlgate_authorizer_socket = \"$sock\""
		echo 'var.rlgate_guard             = "/static/"'
		echo "include \"$W/lighttpd/authorizer.conf\""
		if [ "$variant" = authorizer-headers ]; then
			echo "var.rlgate_headers_lua       = \"$W/lighttpd/rlgate-headers.lua\""
			echo "include \"$W/lighttpd/authorizer-headers.conf\""
		fi
	} | write_lighttpd_base "$T/$variant.conf" "$LPORT" "$T/docroot" \
	    "$T/$variant.pid" "$T/$variant-error.log"
	start_lighttpd "$T/$variant.conf" "$LPORT"
	flood "lighttpd-$variant.conf" "http://127.0.0.1:$LPORT/static/hello.txt"
	stop_pids "$LIGHTTPD_PID"
done

# lighttpd: forward_auth.conf, asked as its "Check it" step says (the front's
# headers are believed only from [client] trusted_proxies, which the
# packaged config leaves empty: the auth request is counted as the
# front's own)
LPORT=$(free_port) || bail_out "no free port"
write_lighttpd_base "$T/forward_auth.conf" "$LPORT" "$T/docroot" "$T/forward_auth.pid" \
    "$T/forward_auth-error.log" <<EOF2
var.rlgate_forward_auth        = "/.rlgate/auth"
var.rlgate_forward_auth_socket = "$sock"
include "$W/lighttpd/forward_auth.conf"
EOF2
start_lighttpd "$T/forward_auth.conf" "$LPORT"
flood lighttpd-forward_auth.conf "http://127.0.0.1:$LPORT/.rlgate/auth" \
    -H 'X-Forwarded-Uri: /static/hello.txt' -H 'X-Forwarded-Method: GET'
stop_pids "$LIGHTTPD_PID"

# Apache: rlgate.conf (the responder at /api/, on the unix socket, which
# spawn-fcgi -U/-G gave to www-data: Apache and nginx run as www-data)
if [ -x "$APACHE_BIN" ] && [ -f "$APACHE_MODULES/mod_authnz_fcgi.so" ]; then
	AP_PORT=$(free_port) || bail_out "no free port"
	write_apache_conf "$T/apache1/httpd.conf" "$AP_PORT" "$T/apache1" \
	    "User www-data
Group www-data
Define RLGATE_SOCKET $sock
Include \"$W/apache/rlgate.conf\""
	start_apache "$T/apache1/httpd.conf" "$AP_PORT"
	flood apache-rlgate.conf "http://127.0.0.1:$AP_PORT/api/v1/resources"
	stop_pids "$APACHE_PID"

	# Apache: authorizer.conf (mod_authnz_fcgi: rlgate on TCP, as its
	# comments start it), its default guard
	RLGATE_PORT=$(free_port) || bail_out "no free port"
	spawn-fcgi -a 127.0.0.1 -p "$RLGATE_PORT" -u rlgate -g rlgate -n -- /usr/sbin/rlgate \
	    --config /etc/rlgate/rlgate.conf --processes 1 --threads 2 \
	    </dev/null >/dev/null 2>"$T/rlgate-tcp.log" &
	tcp_sv=$!
	track_pid "$tcp_sv"
	wait_for_port "$RLGATE_PORT" 10 "$tcp_sv" || bail_out "rlgate did not listen on $RLGATE_PORT"
	AP_PORT=$(free_port) || bail_out "no free port"
	write_apache_conf "$T/apache2/httpd.conf" "$AP_PORT" "$T/apache2" \
	    "$(for m in authn_core authz_user authnz_fcgi headers; do _apache_module $m; done)
DocumentRoot \"$T/docroot\"
<Directory \"$T/docroot\">
    Require all granted
</Directory>
Define RLGATE_PORT $RLGATE_PORT
Include \"$W/apache/authorizer.conf\""
	start_apache "$T/apache2/httpd.conf" "$AP_PORT"
	flood apache-authorizer.conf "http://127.0.0.1:$AP_PORT/static/hello.txt"
	stop_pids "$APACHE_PID"
	kill -TERM "$tcp_sv"
	timeout 20 tail --pid="$tcp_sv" -f /dev/null
else
	diag "no Apache with mod_authnz_fcgi: its snippets are not tried"
fi

# nginx: rlgate.conf in the server, guard.conf in location /static/
NGINX_BIN=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)
if [ -x "$NGINX_BIN" ]; then
	NPORT=$(free_port) || bail_out "no free port"
	mkdir -p "$T/nginx"
	cat >"$T/nginx/nginx.conf" <<EOF2
# written by $(basename "$0")
user www-data;
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log;
events { worker_connections 64; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    client_body_temp_path $T/nginx/body;
    proxy_temp_path $T/nginx/proxy;
    fastcgi_temp_path $T/nginx/fastcgi;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    upstream rlgate {
        server unix:$sock;
    }
    server {
        listen 127.0.0.1:$NPORT;
        root $T/docroot;
        include $W/nginx/rlgate.conf;
        location /static/ {
            include $W/nginx/guard.conf;
        }
    }
}
EOF2
	"$NGINX_BIN" -t -q -e "$T/nginx/error.log" -c "$T/nginx/nginx.conf" >"$T/nginx.out" 2>&1 ||
		bail_out "nginx rejects its config: $(head -5 "$T/nginx.out")"
	"$NGINX_BIN" -e "$T/nginx/error.log" -c "$T/nginx/nginx.conf" -g 'daemon off;' \
	    </dev/null >>"$T/nginx.out" 2>&1 &
	nginx_pid=$!
	track_pid "$nginx_pid"
	wait_for_port "$NPORT" 10 "$nginx_pid" || bail_out "nginx did not listen on $NPORT"
	flood nginx-rlgate.conf+guard.conf "http://127.0.0.1:$NPORT/static/hello.txt"
	stop_pids "$nginx_pid"
else
	diag "no nginx: its snippets are not tried"
fi

# Caddy: rlgate.caddy, the guard on the unix socket, a static site
if command -v caddy >/dev/null; then
	CPORT=$(free_port) || bail_out "no free port"
	cat >"$T/Caddyfile" <<EOF2
{
	admin off
	auto_https off
}
import $W/caddy/rlgate.caddy

http://127.0.0.1:$CPORT {
	bind 127.0.0.1
	import rlgate unix/$sock
	import rlgate_admin unix/$sock
	root * $T/docroot
	file_server
}
EOF2
	mkdir -p "$T/caddy-home"
	HOME="$T/caddy-home" XDG_CONFIG_HOME="$T/caddy-home/config" \
	    XDG_DATA_HOME="$T/caddy-home/data" \
	    caddy run --config "$T/Caddyfile" --adapter caddyfile </dev/null >"$T/caddy.log" 2>&1 &
	caddy_pid=$!
	track_pid "$caddy_pid"
	wait_for_port "$CPORT" 15 "$caddy_pid" || bail_out "caddy did not listen: $(tail -5 "$T/caddy.log")"
	flood caddy-rlgate.caddy "http://127.0.0.1:$CPORT/static/hello.txt"
	stop_pids "$caddy_pid"
else
	diag "no caddy: its snippet is not tried"
fi

# the packaged logrotate rule: the log moves aside, the supervisor (found
# by its pid file: no systemd here) opens a new one, and what rlgate logs
# next lands there (a rejection is logged at [log] level = warn)
if command -v logrotate >/dev/null; then
	like "$(grep -c . "$rlog" 2>/dev/null)" '^[1-9]' "rlgate logs to $rlog"
	logrotate -f -s "$T/logrotate.state" /etc/logrotate.d/rlgate >"$T/logrotate.out" 2>&1
	is "$?" 0 "logrotate -f /etc/logrotate.d/rlgate: exit 0"
	ok "$([ -s "$rlog.1" ]; echo $?)" "... the log is now $rlog.1"
	for _ in $(seq 1 50); do
		[ -e "$rlog" ] && break
		sleep 0.1
	done
	ok "$([ -e "$rlog" ]; echo $?)" "... and the supervisor opened $rlog again (SIGUSR1 by its pid file)"
	n1=$(wc -l <"$rlog.1")
	flood after-logrotate "http://127.0.0.1:$PORT/api/v1/resources"
	like "$(grep -c . "$rlog" 2>/dev/null)" '^[1-9]' \
	    "... where the rejections logged next land"
	is "$(wc -l <"$rlog.1")" "$n1" "... and not in $rlog.1"
else
	fail "logrotate is installed (scripts/deps.sh installs it): the packaged rule cannot be tried"
fi
stop_pids "$main_lighttpd"

kill -TERM "$sv"
timeout 20 tail --pid="$sv" -f /dev/null
ok "$(pid_gone "$sv"; echo $?)" "SIGTERM to the pid in $pidfile stops the supervisor"

# ---- 4. purge ------------------------------------------------------------------------

dpkg --purge rlgate >"$T/purge.log" 2>&1
is "$?" 0 "dpkg --purge: exit 0"
installed=0
left=
for f in /usr/sbin/rlgate /etc/rlgate /var/lib/rlgate /var/log/rlgate /usr/share/rlgate /run/rlgate \
    /lib/systemd/system/rlgate.service /lib/systemd/system/rlgate.socket \
    /etc/logrotate.d/rlgate /usr/share/doc/rlgate; do
	[ -e "$f" ] && left="$left $f"
done
is "${left# }" "" "purged: nothing of it is left"
ok "$(! getent passwd rlgate >/dev/null; echo $?)" "... nor the user rlgate"
ok "$(! getent group rlgate >/dev/null; echo $?)" "... nor its group"

done_testing
