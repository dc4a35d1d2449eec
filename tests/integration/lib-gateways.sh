# shellcheck shell=bash
# tests/integration/lib-gateways.sh: two rlgate gateways, each its own
# lighttpd and spawn-fcgi, on one shared store (redis.sh, redis_cluster.sh).
# Sourced after lib.sh; uses T, and NPROC and NTHREADS (spawn-fcgi -F and
# --threads of each gateway).

# gateways_init [PORT...]: the gateways' run directories ($run1, $run2),
# two free ports P1 and P2 (different from each other and from every PORT
# given: the store's), their lighttpd configs and URL[1], URL[2].
gateways_init() {
	local taken=" $* " _
	run1="$T/run1"
	run2="$T/run2"
	mkdir -p "$run1" "$run2"
	chmod 755 "$run1" "$run2"
	for _ in 1 2 3 4 5; do
		P1=$(free_port) || bail_out "no free port"
		[[ $taken != *" $P1 "* ]] && break
	done
	[[ $taken != *" $P1 "* ]] || bail_out "no free port for gateway 1"
	taken="$taken$P1 "
	for _ in 1 2 3 4 5; do
		P2=$(free_port) || bail_out "no free port"
		[[ $taken != *" $P2 "* ]] && break
	done
	[[ $taken != *" $P2 "* ]] || bail_out "no second free port"
	write_lighttpd_demo_conf "$T/lighttpd1.conf" "$P1" "$run1"
	write_lighttpd_demo_conf "$T/lighttpd2.conf" "$P2" "$run2"
	URL[1]="http://127.0.0.1:$P1/api/v1/resources"
	URL[2]="http://127.0.0.1:$P2/api/v1/resources"
	STARTED_LIGHTTPD=0
	CUR=
}

# use_gateways NAME: stops the running gateways' rlgate and starts NAME
# ($T/NAME.conf) behind both lighttpds (logs $T/NAME-1.log, $T/NAME-2.log),
# starting the lighttpds the first time; one request from 127.0.0.250 (a
# client no check looks at) through each proves the pair answers.
use_gateways() {
	local name=$1 g
	if [ -n "$CUR" ]; then
		stop_rlgate_fcgi "$CUR-1"
		stop_rlgate_fcgi "$CUR-2"
	fi
	"$RLGATE_BIN" --check-config --config "$T/$name.conf" >"$T/$name.check" 2>&1 ||
		bail_out "rlgate rejects $name.conf: $(head -5 "$T/$name.check")"
	start_rlgate_fcgi "$name-1" "$run1/rlgate.sock" "$T/$name.conf" "$NPROC" --threads "$NTHREADS"
	start_rlgate_fcgi "$name-2" "$run2/rlgate.sock" "$T/$name.conf" "$NPROC" --threads "$NTHREADS"
	CUR=$name
	if [ "$STARTED_LIGHTTPD" = 0 ]; then
		start_lighttpd "$T/lighttpd1.conf" "$P1"
		start_lighttpd "$T/lighttpd2.conf" "$P2"
		STARTED_LIGHTTPD=1
	fi
	for g in 1 2; do
		req --interface 127.0.0.250 "${URL[$g]}"
		[ "$STATUS" = 200 ] ||
			bail_out "gateway $g ($name) does not answer: $STATUS $BODY $(tail -3 "$T/$name-$g.log")"
	done
}
