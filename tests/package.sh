#!/usr/bin/env bash
# package.sh: the Debian package, built, installed, used and purged on
# this machine (root; scripts/test.sh runs it once, after make check):
#   1. dpkg-buildpackage -us -uc -b on a copy of the source tree builds
#      rlgate_VERSION_amd64.deb; lintian reports no error and no warning;
#   2. dpkg -i installs /usr/sbin/rlgate, /etc/rlgate/rlgate.conf (a
#      conffile), the systemd units, the man pages, the snippets under
#      /usr/share/rlgate, a logrotate rule; creates the system user rlgate
#      and gives it /var/lib/rlgate;
#   3. the installed rlgate, run as rlgate (its supervisor under
#      spawn-fcgi -n, as the unit runs it), passes --check-config and
#      answers through lighttpd mounted with the packaged snippet, its
#      database in /var/lib/rlgate;
#   4. dpkg --purge leaves nothing behind: files, state, logs, the user.
# Skipped unless root with dpkg-buildpackage, debhelper and lintian, and
# when an rlgate package is installed already (not this test's to touch).
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

# ---- 3. serve as the unit does ----------------------------------------------------

setpriv --reuid=rlgate --regid=rlgate --init-groups /usr/sbin/rlgate \
    --config /etc/rlgate/rlgate.conf --check-config >"$T/check.out" 2>&1
is "$?" 0 "as rlgate: --check-config passes (ExecStartPre)"
run="$T/run"
mkdir -p "$run"
chmod 755 "$T" "$run"
sock="$run/rlgate.sock"
spawn-fcgi -s "$sock" -M 0666 -u rlgate -g rlgate -n -- /usr/sbin/rlgate \
    --config /etc/rlgate/rlgate.conf --processes 2 --threads 2 \
    </dev/null >/dev/null 2>"$T/rlgate.log" &
sv=$!
track_pid "$sv"
for _ in $(seq 1 50); do
	[ "$(pgrep -P "$sv" | wc -l)" -eq 2 ] && break
	sleep 0.1
done
is "$(ps -o user= -p "$sv" | tr -d ' ')" rlgate "the supervisor runs as rlgate"
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
kill -TERM "$sv"
timeout 20 tail --pid="$sv" -f /dev/null
stop_pids "$LIGHTTPD_PID"

# ---- 4. purge ------------------------------------------------------------------------

dpkg --purge rlgate >"$T/purge.log" 2>&1
is "$?" 0 "dpkg --purge: exit 0"
installed=0
left=
for f in /usr/sbin/rlgate /etc/rlgate /var/lib/rlgate /var/log/rlgate /usr/share/rlgate \
    /lib/systemd/system/rlgate.service /lib/systemd/system/rlgate.socket \
    /etc/logrotate.d/rlgate /usr/share/doc/rlgate; do
	[ -e "$f" ] && left="$left $f"
done
is "${left# }" "" "purged: nothing of it is left"
ok "$(! getent passwd rlgate >/dev/null; echo $?)" "... nor the user rlgate"
ok "$(! getent group rlgate >/dev/null; echo $?)" "... nor its group"

done_testing
