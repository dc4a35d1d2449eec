# shellcheck shell=bash
# tests/integration/lib-gateways.sh: two rlgate gateways, each its own
# lighttpd and spawn-fcgi, on one shared store (redis.sh, redis_cluster.sh),
# and the load both take at once. Sourced after lib.sh; uses T, and NPROC
# and NTHREADS (spawn-fcgi -F and --threads of each gateway). The variables
# set here (URL, H200, ...) are read by the sourcing scripts.
# shellcheck disable=SC2034

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
	check_conf "$name"
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

# hammer_start CLIENT TAG N [MAX_S]: N requests from CLIENT to each gateway
# at the same time (two curl --parallel, 16 connections each, each request
# bounded by MAX_S seconds, 30 by default), in the background. Answers in
# $T/TAG.g1 and $T/TAG.g2, one line "STATUS|Retry-After|RateLimit-Remaining"
# each (in completion order), bodies in $T/TAG.d/g1.N, g2.N.
# (-w %header{NAME} needs curl 7.84 or later; Debian 12 has 7.88.)
hammer_start() {
	local cl=$1 tag=$2 n=$3 max_s=${4:-30} g
	HPIDS=()
	HTAG=$tag
	rm -rf "$T/$tag.d"
	mkdir -p "$T/$tag.d"
	for g in 1 2; do
		curl -sS --no-progress-meter --max-time "$max_s" --parallel --parallel-max 16 \
		    --interface "$cl" -o "$T/$tag.d/g$g.#1" \
		    -w '%{http_code}|%header{retry-after}|%header{ratelimit-remaining}\n' \
		    "${URL[$g]}?n=[1-$n]" >"$T/$tag.g$g" 2>"$T/$tag.g$g.err" &
		HPIDS+=($!)
		track_pid "$!"
	done
}

# hammer_wait: waits for hammer_start's curls (each transfer is bounded by
# --max-time; the whole by 120 s here, then they are stopped), shows what
# they wrote on stderr, and counts the answers (hammer_count).
hammer_wait() {
	if ! wait_until 120000 pids_gone "${HPIDS[@]}"; then
		diag "hammer $HTAG: curl still running after 120 s; stopped"
		stop_pids "${HPIDS[@]}"
	fi
	wait "${HPIDS[@]}" 2>/dev/null
	curl_errors "hammer $HTAG" "$T/$HTAG"
	hammer_count "$T/$HTAG"
}

# hammer CLIENT TAG N [MAX_S]: hammer_start, then hammer_wait.
hammer() {
	hammer_start "$@"
	hammer_wait
}

# curl_errors WHAT PREFIX: the first lines curl wrote to PREFIX.g1.err and
# PREFIX.g2.err (one file per gateway), as diagnostics.
curl_errors() {
	local g
	for g in 1 2; do
		if [ -s "$2.g$g.err" ]; then
			diag "$1, gateway $g: curl: $(head -3 "$2.g$g.err")"
		fi
	done
}

# hammer_count PREFIX: the answers in PREFIX.g1 and PREFIX.g2 (one per line,
# the status first, then "|..." or nothing): H200, H429, HOTHER (the other
# statuses as "COUNT STATUS ...", "" when none) and HN over both; HN1, HN2,
# H200_1 and H200_2 per gateway.
hammer_count() {
	local p=$1
	H200=$(cut -d'|' -f1 "$p.g1" "$p.g2" | grep -c '^200$')
	H429=$(cut -d'|' -f1 "$p.g1" "$p.g2" | grep -c '^429$')
	HOTHER=$(cut -d'|' -f1 "$p.g1" "$p.g2" | grep -vE '^(200|429)$' | sort | uniq -c | tr -s ' \n' '  ')
	HOTHER=${HOTHER# }
	HOTHER=${HOTHER% }
	HN1=$(wc -l <"$p.g1")
	HN2=$(wc -l <"$p.g2")
	HN=$((HN1 + HN2))
	H200_1=$(cut -d'|' -f1 "$p.g1" | grep -c '^200$')
	H200_2=$(cut -d'|' -f1 "$p.g2" | grep -c '^200$')
}
