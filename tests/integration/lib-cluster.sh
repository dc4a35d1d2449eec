# shellcheck shell=bash
# tests/integration/lib-cluster.sh: a Redis Cluster of three masters on
# 127.0.0.1 (redis_cluster.sh, global.sh). Sourced after lib.sh; defines
# functions only. start_cluster starts it (in $T/cluster, free ports
# whose cluster bus ports, port + 10000, are free too; no persistence, no
# replicas) and sets PORTS, the masters' ports; cli and ccli speak to it.
# The variables set here (PORTS, CDIR) are read by the sourcing scripts.
# shellcheck disable=SC2034

PORTS=()

# cli PORT ARGS...: one redis-cli command on 127.0.0.1:PORT (raw output),
# bounded; ccli ARGS...: the same through the cluster (-c follows MOVED).
cli() {
	local p=$1
	shift
	timeout 10 "$REDIS_CLI" -h 127.0.0.1 -p "$p" "$@" 2>>"$T/redis-cli.err"
}
ccli() {
	timeout 10 "$REDIS_CLI" -c -h 127.0.0.1 -p "${PORTS[0]}" "$@" 2>>"$T/redis-cli.err"
}

# cluster_port: a free port <= 22767 whose bus port (+ 10000) is free too,
# and not one of PORTS yet; both reserved (reserve_port).
cluster_port() {
	local i p q
	for i in $(seq 1 100); do
		p=$((10000 + (RANDOM * 32768 + RANDOM) % 12768))
		for q in "${PORTS[@]}"; do
			[ "$p" = "$q" ] && continue 2
		done
		port_in_use "$p" || port_in_use $((p + 10000)) ||
		    ! reserve_port "$p" || ! reserve_port $((p + 10000)) || { echo "$p"; return 0; }
	done
	return 1
}

# shellcheck disable=SC2317  # called through wait_until
node_up() {
	[ "$(cli "$1" PING)" = PONG ]
}

# shellcheck disable=SC2317  # called through wait_until
cluster_ok() {
	local p
	for p in "${PORTS[@]}"; do
		cli "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
	done
}

# start_node PORT: one cluster-enabled redis-server, tracked by pid.
start_node() {
	local p=$1
	"$REDIS_SERVER" --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
	    --dir "$CDIR" --daemonize no --cluster-enabled yes \
	    --cluster-config-file "$CDIR/nodes-$p.conf" --cluster-node-timeout 2000 \
	    </dev/null >>"$CDIR/redis-$p.log" 2>&1 &
	track_pid "$!"
	wait_until 10000 node_up "$p" ||
		bail_out "redis-server on $p did not answer PING: $(tail -5 "$CDIR/redis-$p.log")"
}

# start_cluster: three nodes (PORTS), joined with redis-cli --cluster
# create; bails out unless every node says cluster_state:ok within 30 s.
start_cluster() {
	local i
	CDIR="$T/cluster"
	mkdir -p "$CDIR"
	for i in 0 1 2; do
		PORTS[i]=$(cluster_port) || bail_out "no free port for a cluster node"
		start_node "${PORTS[i]}"
	done
	timeout 60 "$REDIS_CLI" --cluster create "127.0.0.1:${PORTS[0]}" "127.0.0.1:${PORTS[1]}" \
	    "127.0.0.1:${PORTS[2]}" --cluster-replicas 0 --cluster-yes >"$T/create.log" 2>&1 ||
		bail_out "redis-cli --cluster create failed: $(tail -5 "$T/create.log")"
	wait_until 30000 cluster_ok || bail_out "the cluster is not ok after 30 s"
	diag "redis-server $("$REDIS_SERVER" --version | awk '{ print $3 }'): a cluster of three masters on 127.0.0.1:${PORTS[0]}, ${PORTS[1]}, ${PORTS[2]}"
}
