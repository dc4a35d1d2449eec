#!/usr/bin/env bash
# redis_cluster.sh: the Redis store on a real Redis Cluster. Three
# redis-server masters started here (127.0.0.1, free ports whose cluster
# bus ports, port + 10000, are free too; no persistence, no replicas),
# joined with redis-cli --cluster create; two gateways, each its own
# lighttpd + spawn-fcgi (2 processes x 2 threads) on its own port, both
# with [store] backend = redis_cluster and the three masters as seeds:
#
#   1. exact counting across gateways on the cluster: for fixed_window and
#      sliding_log (a state hash and a log list, in one slot), 50 per
#      3600 s, one client sends 100 requests to each gateway at once (curl
#      --parallel, 16 connections to each): exactly 50 admitted in total,
#      every other answer a 429, and the client's keys, read with
#      redis-cli -c from any node, count the same 50 on the master of the
#      client's slot (CLUSTER KEYSLOT), and on no other node;
#   2. clients spread: 30 clients, one request each through alternate
#      gateways, all counted once, their keys on all three masters;
#   3. a slot migration under load: one client's requests go to both
#      gateways without pause (batches of 100, 2 at a time to each) against
#      a limit of 3000 while its slot moves to another master the way
#      redis-cli --cluster reshard moves it: SETSLOT IMPORTING and
#      MIGRATING, MIGRATE of its key, SETSLOT NODE on every master, each
#      step once 150 more requests were counted in the state before it
#      (the keys still on the old master: served there; moved: ASK to the
#      new one; the slot moved: MOVED); until 200 answers after the quota
#      is gone. Exactly 3000 admitted, no answer but 200 and 429 (no store
#      error: on_error = closed would answer 503), the count 3000 on the
#      new master, nothing left on the old one, which answered both ASK
#      and MOVED; no "store lost" line.
#
# REDIS_SERVER and REDIS_CLI name the binaries (default: from PATH).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }
# shellcheck source=tests/integration/lib-gateways.sh
. "$RLGATE_SRCDIR/tests/integration/lib-gateways.sh" || { echo "Bail out! cannot read lib-gateways.sh"; exit 99; }
# shellcheck source=tests/integration/lib-cluster.sh
. "$RLGATE_SRCDIR/tests/integration/lib-cluster.sh" || { echo "Bail out! cannot read lib-cluster.sh"; exit 99; }

REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
# a missing Redis is a broken set-up (scripts/deps.sh installs them)
setup_test lighttpd spawn-fcgi curl timeout stdbuf "$REDIS_SERVER" "$REDIS_CLI"

WINDOW=3600
NPROC=2
NTHREADS=2

# ---- the cluster ---------------------------------------------------------------

# (cli, ccli, PORTS and the cluster's start: lib-cluster.sh)
start_cluster
is "$(cli "${PORTS[0]}" CLUSTER INFO | tr -d '\r' | grep -E '^cluster_(slots_assigned|known_nodes|size):' | tr '\n' ' ')" \
    "cluster_slots_assigned:16384 cluster_known_nodes:3 cluster_size:3 " \
    "the cluster: 16384 slots over three masters"

# slot_of KEY; owner_of SLOT: the port of the master of SLOT; id_of PORT.
slot_of() {
	cli "${PORTS[0]}" CLUSTER KEYSLOT "$1"
}
owner_of() {
	# raw CLUSTER SLOTS: per range its first and last slot, then the
	# master's address, port and id (then its replicas: none here)
	cli "${PORTS[0]}" CLUSTER SLOTS | tr -d '\r' | awk -v s="$1" '{ l[NR] = $0 }
	    END { for (i = 1; i + 3 <= NR; i++)
	        if (l[i + 2] == "127.0.0.1" && l[i] ~ /^[0-9]+$/ && l[i + 1] ~ /^[0-9]+$/ &&
	            s + 0 >= l[i] + 0 && s + 0 <= l[i + 1] + 0) { print l[i + 3]; exit } }'
}
id_of() {
	cli "$1" CLUSTER MYID
}
# errorstat PORT NAME: how many NAME errors (MOVED, ASK) PORT replied.
errorstat() {
	cli "$1" INFO errorstats | tr -d '\r' | sed -n "s/^errorstat_$2:count=//p" | grep . || echo 0
}

# ---- two gateways --------------------------------------------------------------

gateways_init "${PORTS[@]}" $((PORTS[0] + 10000)) $((PORTS[1] + 10000)) \
    $((PORTS[2] + 10000))   # and the cluster bus ports
SEEDS="redis://127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"

# gwconf NAME: writes $T/NAME.conf, the cluster store, no rejection cache
# (every request goes to Redis), the [policy] sections from stdin.
gwconf() {
	{
		cat <<EOF
; written by $(basename "$0")
[store]
backend = redis_cluster
url = $SEEDS
connect_timeout_ms = 1000
timeout_ms = 2000
on_error = closed
rejection_cache = 0

EOF
		cat
	} >"$T/$1.conf"
}


# key CLIENT POLICY: the client's state hash; its sliding log is KEY:log.
key() {
	echo "rlg:{$1}:$2"
}

# ============================================================================
# 1. exact counting across two gateways, on the cluster
LIMIT=50
NREQ=100
n=0
for alg in fixed_window sliding_log; do
	n=$((n + 1))
	gwconf "x-$alg" <<EOF
[policy $alg]
algorithm = $alg
limit = $LIMIT
window = $WINDOW
EOF
	use_gateways "x-$alg"
	CL=127.0.1.$n
	k=$(key "$CL" "$alg")
	ensure_window_room $WINDOW 30
	hammer "$CL" "h-$alg" $NREQ 60
	is "$HN" $((2 * NREQ)) "$alg: $NREQ answers from each gateway"
	is "$H200" "$LIMIT" "$alg: exactly $LIMIT admitted over both gateways"
	is "$H429|$HOTHER" "$((2 * NREQ - LIMIT))|" "$alg: every other answer a 429 (no other status)"
	is "$(ccli HGET "$k" count)" "$LIMIT" "$alg: redis-cli -c HGET '$k' count: $LIMIT, as admitted"
	if [ $alg = sliding_log ]; then
		is "$(ccli LLEN "$k:log")" "$LIMIT" "$alg: redis-cli -c LLEN '$k:log': $LIMIT"
		is "$(slot_of "$k:log")" "$(slot_of "$k")" "$alg: the log is in the slot of the state (hash tag {$CL})"
	fi
	owner=$(owner_of "$(slot_of "$k")")
	is "$(cli "$owner" EXISTS "$k")" 1 "$alg: the state is on the master of slot $(slot_of "$k") (127.0.0.1:$owner)"
	others=0
	for p in "${PORTS[@]}"; do
		[ "$p" = "$owner" ] && continue
		others=$((others + $(cli "$p" --scan --pattern "rlg:{$CL}:*" | wc -l)))
	done
	is "$others" 0 "$alg: and no key of the client is on another master"
	lost=$(grep -c 'store lost' "$T/x-$alg-1.log" "$T/x-$alg-2.log" | awk -F: '{ s += $2 } END { print s }')
	is "$lost" 0 "$alg: no store error in either gateway's log"
done

# ============================================================================
# 2. clients spread over the three masters
gwconf spread <<EOF
[policy default]
algorithm = fixed_window
limit = 5
window = $WINDOW
EOF
use_gateways spread
bad=0
for i in $(seq 1 30); do
	req --interface "127.0.2.$i" "${URL[$((i % 2 + 1))]}"
	[ "$STATUS" = 200 ] || bad=$((bad + 1))
done
is "$bad" 0 "30 clients, one request each through alternate gateways: all 200"
holders=0
total=0
for p in "${PORTS[@]}"; do
	c=$(cli "$p" --scan --pattern 'rlg:{127.0.2.*}:default' | wc -l)
	total=$((total + c))
	[ "$c" -gt 0 ] && holders=$((holders + 1))
done
is "$total|$holders" "30|3" "their 30 states are spread over all three masters"
counts=$(for i in $(seq 1 30); do ccli HGET "$(key "127.0.2.$i" default)" count; done | sort | uniq -c | tr -s ' \n' '  ')
is "$counts" " 30 1 " "each counted once (redis-cli -c HGET)"

# ============================================================================
# 3. a slot migration under load

# bg_hammer CLIENT G: until $T/mig.stop exists (60 batches at most), batches
# of 100 requests from CLIENT to gateway G, 2 at a time (curl --parallel:
# slow enough that each phase below sees many, fast enough to be load);
# one status line per answer in $T/mig.gG, written as it comes (stdbuf).
bg_hammer() {
	local cl=$1 g=$2 i
	for ((i = 0; i < 60; i++)); do
		[ -e "$T/mig.stop" ] && break
		stdbuf -oL curl -sS --no-progress-meter --max-time 60 --parallel \
		    --parallel-max 2 --interface "$cl" -o /dev/null -w '%{http_code}\n' \
		    "${URL[$g]}?b=$i&n=[1-100]" >>"$T/mig.g$g" 2>>"$T/mig.g$g.err"
	done
}
# mig_answers: the answers so far; mig_more N: N more than MARK (set by
# mig_mark).
mig_answers() {
	cat "$T/mig.g1" "$T/mig.g2" 2>/dev/null | wc -l
}
mig_mark() {
	MARK=$(mig_answers)
}
# shellcheck disable=SC2317  # called through wait_until
mig_more() {
	[ "$(mig_answers)" -ge $((MARK + $1)) ]
}

# count_at PORT: the client's count on PORT (ASKING first: a master that
# imports the slot answers too); 0 when it has none there.
count_at() {
	local c
	c=$(printf 'ASKING\nHGET %s count\n' "$k" | cli "$1" | tail -1)
	[[ $c =~ ^[0-9]+$ ]] && echo "$c" || echo 0
}
# shellcheck disable=SC2317  # called through wait_until
count_reaches() {
	[ "$(count_at "$1")" -ge "$2" ]
}

LIMIT=3000
STEP=150
gwconf migrate <<EOF
[policy mig]
algorithm = fixed_window
limit = $LIMIT
window = $WINDOW
EOF
use_gateways migrate
CL=127.0.3.1
k=$(key "$CL" mig)
slot=$(slot_of "$k")
from=$(owner_of "$slot")
for p in "${PORTS[@]}"; do
	[ "$p" != "$from" ] && to=$p && break
done
for p in "${PORTS[@]}"; do
	[ "$p" != "$from" ] && [ "$p" != "$to" ] && third=$p
done
id_from=$(id_of "$from")
id_to=$(id_of "$to")
diag "migration: $CL's slot $slot from 127.0.0.1:$from to 127.0.0.1:$to"
ask0=$(errorstat "$from" ASK)
moved0=$(errorstat "$from" MOVED)
ensure_window_room $WINDOW 90
rm -f "$T/mig.stop" "$T/mig.g1" "$T/mig.g2"
bgp=()
for g in 1 2; do
	bg_hammer "$CL" $g &
	bgp+=($!)
	track_pid "$!"
done
# each phase lasts until STEP more requests are counted in it
wait_until 60000 count_reaches "$from" $STEP || diag "migration: fewer than $STEP counted before it in 60 s"
c0=$(count_at "$from")
# redis-cli --cluster reshard's steps; requests go on through each state
cli "$to" CLUSTER SETSLOT "$slot" IMPORTING "$id_from" >/dev/null
cli "$from" CLUSTER SETSLOT "$slot" MIGRATING "$id_to" >/dev/null
wait_until 60000 count_reaches "$from" $((c0 + STEP)) || diag "migration: fewer than $STEP counted with the slot MIGRATING"
mapfile -t keys < <(cli "$from" CLUSTER GETKEYSINSLOT "$slot" 100)
is "${#keys[@]}" 1 "migration: the slot holds the client's one key ($k)"
c1=$(count_at "$from")
is "$(cli "$from" MIGRATE 127.0.0.1 "$to" "" 0 5000 KEYS "${keys[@]}")" OK "migration: MIGRATE of its keys"
c1m=$(count_at "$to")
wait_until 60000 count_reaches "$to" $((c1m + STEP)) || diag "migration: fewer than $STEP counted after MIGRATE"
c2=$(count_at "$to")
# the new owner first, then the old one, then the third
for p in "$to" "$from" "$third"; do
	cli "$p" CLUSTER SETSLOT "$slot" NODE "$id_to" >/dev/null
done
c2m=$(count_at "$to")
# on until the quota is gone, and 200 answers more
wait_until 60000 count_reaches "$to" $LIMIT || diag "migration: the quota was not used up in 60 s"
mig_mark
wait_until 60000 mig_more 200 || diag "migration: fewer than 200 answers after the quota was gone"
touch "$T/mig.stop"
wait_until 90000 pids_gone "${bgp[@]}" || {
	diag "migration: the load did not stop"
	stop_pids "${bgp[@]}"
}
wait "${bgp[@]}" 2>/dev/null
curl_errors migration "$T/mig"
hammer_count "$T/mig"
diag "migration: counted before it $c0, with the slot MIGRATING $((c1 - c0)) more, after MIGRATE $((c2 - c1)) more, after SETSLOT NODE the rest; $HN answers in all"
ok $((!(c0 > 0 && c1 > c0 && c1m >= c1 && c2 > c1m && c2m >= c2))) \
    "migration: requests were counted in each phase: $c0 before it, $c1 with the slot MIGRATING, $c1m moved by MIGRATE, $c2 after it (through ASK), $c2m at SETSLOT NODE, then $LIMIT"
between "$HN" $((LIMIT + 1)) 999999 "migration: more than $LIMIT requests sent ($HN)"
is "$H200" "$LIMIT" "migration: exactly $LIMIT admitted over both gateways"
is "$H429|$HOTHER" "$((HN - LIMIT))|" "migration: every other answer a 429 (no store error, no other status)"
is "$(owner_of "$slot")" "$to" "migration: the slot is 127.0.0.1:$to's now"
is "$(cli "$to" HGET "$k" count)" "$LIMIT" "migration: its count on the new master: $LIMIT"
is "$(ccli HGET "$k" count)" "$LIMIT" "migration: redis-cli -c finds it there from any node"
is "$(cli "$from" --scan --pattern "rlg:{$CL}:*" | wc -l)" 0 "migration: nothing of it is left on the old master"
asks=$(($(errorstat "$from" ASK) - ask0))
moved=$(($(errorstat "$from" MOVED) - moved0))
diag "migration: the old master answered ASK $asks times, MOVED $moved times"
between "$asks" 1 999999 "migration: the gateways followed ASK while the keys were moved and the slot not yet"
between "$moved" 1 999999 "migration: and MOVED after it"
errs=$(grep -ch 'store lost' "$T/migrate-1.log" "$T/migrate-2.log" | awk '{ s += $1 } END { print s }')
is "$errs" 0 "migration: no store error in either gateway's log"

for g in 1 2; do
	rlgate_pids_alive "migrate-$g"
	ok $? "gateway $g's rlgate processes survived"
done
stop_rlgate_fcgi "$CUR-1"
stop_rlgate_fcgi "$CUR-2"
done_testing
