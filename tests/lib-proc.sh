# shellcheck shell=bash
# tests/lib-proc.sh: the process, port and waiting helpers that the
# integration tests (tests/integration/lib.sh) and the benchmarks
# (tests/bench/lib-bench.sh) share, and the start of a lighttpd config of
# their own. Sourced by those two, not run; it prints nothing and sets no
# option, nor a trap unless asked (trap_exit). Every wait is bounded; ports
# are on 127.0.0.1.

# now_ms: wall-clock milliseconds since the epoch.
now_ms() {
	if [ -n "${EPOCHREALTIME:-}" ]; then
		local s=${EPOCHREALTIME%[.,]*} f=${EPOCHREALTIME#*[.,]}
		echo $((s * 1000 + 10#${f:0:3}))
	else
		local ns
		ns=$(date +%s%N)
		echo $((ns / 1000000))
	fi
}

# pid_alive PID: true while PID runs (a zombie counts as gone). Reads
# /proc without forking, so polling loops stay cheap.
pid_alive() {
	local _pid _comm st
	kill -0 "$1" 2>/dev/null || return 1
	if [ -r "/proc/$1/stat" ]; then
		{ read -r _pid _comm st _ <"/proc/$1/stat"; } 2>/dev/null || return 1
	else
		st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	fi
	[[ $st != Z* ]]
}

# port_in_use PORT: true if something listens on 127.0.0.1:PORT.
port_in_use() {
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ] && return 0
	fi
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Ports are reserved while a script holds them, so that scripts running at
# once (make -j check, two builds side by side) never get the same port
# between one's pick and its server's bind: a directory
# RLGATE_PORT_DIR/PORT (default /tmp/rlgate-ports, mode 1777, one for
# every build and user of the machine, since ports are too), made with
# mkdir, which is atomic, holding "pid": the pid of the script that took it
# ($$, the same in its $(...) subshells). A reservation whose script has
# ended is stale and taken over; stop_and_remove releases the script's own.

# reserve_port PORT: true if PORT is now this script's (no live script,
# this one included, held it). True too, reserving nothing, when the
# directory cannot be made (no sharing, as before reservations).
reserve_port() {
	local d=${RLGATE_PORT_DIR:-/tmp/rlgate-ports} owner=
	[ -d "$d" ] || mkdir -m 1777 "$d" 2>/dev/null || [ -d "$d" ] || return 0
	[ -w "$d" ] || return 0
	if ! mkdir "$d/$1" 2>/dev/null; then
		{ read -r owner <"$d/$1/pid"; } 2>/dev/null
		# an empty pid: its script is writing it now
		[ -z "$owner" ] || [ -d "/proc/$owner" ] && return 1
		# stale: one rename takes it over (of two scripts, one wins)
		mv "$d/$1" "$d/$1.stale.$$" 2>/dev/null || return 1
		rm -rf "$d/$1.stale.$$"
		mkdir "$d/$1" 2>/dev/null || return 1
	fi
	echo $$ >"$d/$1/pid"
}

# release_ports: removes this script's reservations.
release_ports() {
	local d=${RLGATE_PORT_DIR:-/tmp/rlgate-ports} r owner
	for r in "$d"/*/pid; do
		owner=
		{ read -r owner <"$r"; } 2>/dev/null
		[ "$owner" = $$ ] && rm -rf "${r%/pid}"
	done
	return 0
}

# free_port: prints a free TCP port on 127.0.0.1 from 10000 up to below
# the kernel's ephemeral range (ip_local_port_range; 32767 when it cannot
# be read or starts too low, never above 55535 so that a Redis Cluster
# bus port, PORT + 10000, exists too), reserved (reserve_port): no client
# connection, nor another test, can take it between this check and the
# server's bind. Fails if none found.
# Use: PORT=$(free_port) || bail_out "no free port"
free_port() {
	local _ p lo=10000 hi=32767 eph
	eph=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
	if [[ $eph =~ ^[0-9]+$ ]] && [ "$eph" -gt 11000 ]; then
		hi=$((eph - 1))
	fi
	[ "$hi" -le 55535 ] || hi=55535
	for _ in $(seq 1 100); do
		p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
		if ! port_in_use "$p" && reserve_port "$p"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# wait_for_port PORT [TIMEOUT_S] [PID]: until 127.0.0.1:PORT accepts, or
# fails after TIMEOUT_S (default 10) or as soon as PID (if given) is gone.
wait_for_port() {
	local port=$1 timeout=${2:-10} pid=${3:-} _
	for _ in $(seq 1 $((timeout * 50))); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		if [ -n "$pid" ] && ! pid_alive "$pid"; then
			return 1
		fi
		sleep 0.02
	done
	return 1
}

# wait_for_file PATH [TIMEOUT_S]: until PATH exists (any type), or fails
# after TIMEOUT_S (default 10).
wait_for_file() {
	local _
	for _ in $(seq 1 $((${2:-10} * 50))); do
		[ -e "$1" ] && return 0
		sleep 0.02
	done
	return 1
}

# wait_until MS CMD [ARGS...]: runs CMD every 50 ms until it succeeds (0) or
# MS milliseconds have passed (1).
wait_until() {
	local deadline=$(($(now_ms) + $1))
	shift
	until "$@"; do
		[ "$(now_ms)" -ge "$deadline" ] && return 1
		sleep 0.05
	done
}

# stop_and_remove KEEP DIR PID...: an EXIT trap's work: stops the PIDs
# (the sourcing library's stop_pids, 2 s to go), releases the script's
# ports, then removes the temporary directory DIR (if set) unless KEEP is
# 1; fails when it kept DIR.
stop_and_remove() {
	local keep=$1 dir=$2
	shift 2
	[ $# -gt 0 ] && STOP_GRACE_MS=2000 stop_pids "$@"
	release_ports
	[ -n "$dir" ] && [ -d "$dir" ] || return 0
	[ "$keep" = 1 ] && return 1
	rm -rf "$dir"
}

# trap_exit FN: FN runs on exit, and SIGINT, SIGTERM and SIGHUP exit (with
# 130, 143, 129) so that it runs for them too.
trap_exit() {
	# shellcheck disable=SC2064  # FN is named now, on purpose
	trap "$1" EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

# write_lighttpd_base FILE PORT DOCROOT PIDFILE ERRORLOG: a lighttpd config
# of the script's own (not the demo's) on 127.0.0.1:PORT, serving DOCROOT,
# with PIDFILE and ERRORLOG; the rest of it (modules, ...) from stdin.
write_lighttpd_base() {
	cat >"$1" <<EOF
# written by $(basename "$0")
server.bind          = "127.0.0.1"
server.port          = $2
server.document-root = "$3"
server.pid-file      = "$4"
server.errorlog      = "$5"
EOF
	cat >>"$1"
}
