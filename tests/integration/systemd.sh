#!/usr/bin/env bash
# systemd.sh: the shipped systemd units, without a running systemd (the
# test machines have none):
#   1. systemd-analyze verify finds nothing wrong in systemd/rlgate.socket
#      and systemd/rlgate.service (their paths pointed at this build), and
#      the service holds what an operator expects: the socket, the
#      supervisor, ExecReload by SIGHUP, KillMode=mixed, Restart=, a
#      StateDirectory, the hardening directives;
#   2. socket activation as the units do it: systemd-socket-activate binds
#      the unix socket and starts rlgate --processes 2 on the first
#      connection (LISTEN_FDS), which serves lighttpd's requests; SIGHUP
#      reloads; SIGTERM stops it, exit 0.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

if ! command -v systemd-analyze >/dev/null || ! command -v systemd-socket-activate >/dev/null; then
	skip_all "systemd-analyze and systemd-socket-activate are not installed (Debian: systemd; scripts/deps.sh installs it)"
fi
setup_test lighttpd spawn-fcgi curl timeout

units="$RLGATE_SRCDIR/systemd"
make_rundir
write_rlgate_conf "$T/sd.conf" "$T/sd.db" 5 3600

# ---- 1. the units ----------------------------------------------------------------

mkdir -p "$T/units"
sed -e "s|/usr/sbin/rlgate|$RLGATE_BIN|g" -e "s|/etc/rlgate/rlgate.conf|$T/sd.conf|g" \
    "$units/rlgate.service" >"$T/units/rlgate.service"
cp "$units/rlgate.socket" "$T/units/rlgate.socket"
(cd "$T/units" && timeout 60 systemd-analyze verify --man=no rlgate.socket rlgate.service) \
    >"$T/verify.out" 2>&1
is "$?" 0 "systemd-analyze verify: exit 0"
is "$(cat "$T/verify.out")" "" "... and nothing to say"
(cd "$units" && timeout 60 systemd-analyze verify --man=no rlgate.socket rlgate.service) \
    >"$T/verify-shipped.out" 2>&1
is "$(grep -v 'Command /usr/sbin/rlgate is not executable' "$T/verify-shipped.out")" "" \
    "the shipped units as they are: nothing but the absent /usr/sbin/rlgate"
svc=$(cat "$units/rlgate.service")
missing=
# shellcheck disable=SC2016  # $MAINPID is the unit's, not ours
for line in 'Requires=rlgate.socket' 'User=rlgate' 'ExecStartPre=/usr/sbin/rlgate --config /etc/rlgate/rlgate.conf --check-config' \
    'ExecStart=/usr/sbin/rlgate --config /etc/rlgate/rlgate.conf --processes 2 --threads 4' \
    'ExecReload=/bin/kill -HUP $MAINPID' 'KillMode=mixed' 'Restart=on-failure' 'StateDirectory=rlgate' \
    'NoNewPrivileges=yes' 'ProtectSystem=strict' 'ProtectHome=yes' 'PrivateTmp=yes' 'PrivateDevices=yes' \
    'CapabilityBoundingSet=' 'SystemCallFilter=@system-service' 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6'; do
	grep -qxF "$line" <<<"$svc" || missing="$missing [$line]"
done
is "${missing# }" "" "rlgate.service: the supervisor, reload, restart, state directory and hardening"
sock_unit=$(cat "$units/rlgate.socket")
like "$sock_unit" $'\nListenStream=/run/rlgate/rlgate.sock\n' "rlgate.socket: /run/rlgate/rlgate.sock"
like "$sock_unit" $'\nSocketGroup=www-data\nSocketMode=0660\n' "... for the web server's group, 0660"

# ---- 2. socket activation ----------------------------------------------------------

rm -f "$sock"
systemd-socket-activate -l "$sock" -- "$RLGATE_BIN" --config "$T/sd.conf" \
    --processes 2 --threads 2 </dev/null >/dev/null 2>"$T/sd.log" &
SA=$!
track_pid "$SA"
for _ in $(seq 1 50); do
	[ -S "$sock" ] && break
	sleep 0.1
done
[ -S "$sock" ] || bail_out "systemd-socket-activate made no socket: $(cat "$T/sd.log")"
chmod 0666 "$sock"
demo_lighttpd "$sock"
codes=
for i in 1 2 3 4 5 6; do
	req "$url"
	codes="$codes $STATUS"
done
is "${codes# }" "200 200 200 200 200 429" "activated by the first connection, rlgate serves (5 per hour, then 429)"
is "$(pgrep -P "$SA" | wc -l)" 2 "... as a supervisor with two workers"
like "$(cat "$T/sd.log")" "supervisor: 2 worker processes started" "... logged"
kill -HUP "$SA"
sleep 0.5
is "$(grep -c 'reload: .*loaded' "$T/sd.log")" 2 "SIGHUP (ExecReload): both workers reload"
kill -TERM "$SA"
timeout 20 tail --pid="$SA" -f /dev/null
wait "$SA"
is "$?" 0 "SIGTERM (systemctl stop): exit 0"

done_testing
