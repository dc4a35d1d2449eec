#!/usr/bin/env bash
# ban.sh: the penalty box ([policy] ban) through lighttpd and rlgate, on
# each store: SQLite with commit = behind (the decision table) and commit =
# each, Redis, and Redis Cluster. The login example of docs/operations.md:
# a route for POST /login, 5 a minute, ban = 900; and a short ban (3 s)
# on POST /otp (a token bucket of 1 a second) to see one end.
#   1. responder (lighttpd's mod_fastcgi on /login, /otp, /rlgate/): the
#      five first attempts pass, the sixth is refused and starts the ban:
#      429, Retry-After 900 (at most 900, at least 899 later), remaining
#      0; refused again during it, Retry-After counting down, never
#      extended; another client is not banned; the ban shows in the
#      sqlite3 shell (view bans) or redis-cli (HGETALL), and in
#      /status (ban_s, and "banned" among the closest clients of a SQLite
#      store); rlgate --reset lifts it; the short ban refuses while the
#      bucket would admit, and ends on time;
#   2. the Authorizer role (lighttpd mode "authorizer" guarding /login,
#      SQLite, commit = behind): the same ban refuses the guarded file.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }
# shellcheck source=tests/integration/lib-cluster.sh
. "$RLGATE_SRCDIR/tests/integration/lib-cluster.sh" || { echo "Bail out! cannot read lib-cluster.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl redis-server redis-cli

make_rundir

# The policies and routes of every config; the [store] section is each
# store's. login is a token bucket (5 a minute, all 5 at once) so that no
# window boundary falls between the five attempts and the sixth.
POLICIES=$(cat <<'EOF'
[headers]
style = draft03

[policy login]
algorithm = token_bucket
limit = 5
window = 60
ban = 900

[route login]
path = /login
methods = POST
policies = login

[policy otp]
algorithm = token_bucket
limit = 1
window = 1
ban = 3

[route otp]
path = /otp
methods = POST
policies = otp
EOF
)

# A lighttpd that hands /login, /otp and the admin paths to rlgate (the
# responder answers 404 for a path it serves nothing at, 429 when a
# policy refuses).
PORT=$(free_port) || bail_out "no free port"
base="http://127.0.0.1:$PORT"
mkdir -p "$T/htdocs"
write_lighttpd_base "$T/lighttpd.conf" "$PORT" "$T/htdocs" "$T/lighttpd.pid" \
    "$T/lighttpd-error.log" <<EOF
server.modules += ( "mod_fastcgi" )
fastcgi.server = (
    "/login"   => (( "socket" => "$sock", "check-local" => "disable" )),
    "/otp"     => (( "socket" => "$sock", "check-local" => "disable" )),
    "/rlgate/" => (( "socket" => "$sock", "check-local" => "disable" )),
)
EOF
start_lighttpd "$T/lighttpd.conf" "$PORT"

# post PATH [CURL_ARGS...]: one POST of a login form, the status in STATUS.
post() {
	local p=$1
	shift
	req -d "user=alice&password=guess" "$@" "$base$p"
}

# check_login NAME SHOW: the login ban through rlgate on $T/NAME.conf
# (started by the caller): SHOW prints the ban's end in ms of client
# 127.0.0.1 as the store's shell shows it (empty: none, or 0).
check_login() {
	local name=$1 show=$2 got end now left i
	got=
	for i in 1 2 3 4 5; do
		post /login
		got="$got $STATUS"
	done
	is "${got# }" "404 404 404 404 404" "$name: five attempts pass the login route (the responder has no /login: 404)"
	post /login
	is "$STATUS" 429 "$name: the sixth is refused, and starts the ban"
	is "$BODY" "$BODY_429" "$name: the 429 body"
	between "$(header Retry-After)" 899 900 "$name: Retry-After: the ban's 900 s"
	is "$(header RateLimit-Remaining)" 0 "$name: RateLimit-Remaining: 0"
	between "$(header RateLimit-Reset)" 899 900 "$name: RateLimit-Reset: the ban's end"
	sleep 1.1
	post /login
	is "$STATUS" 429 "$name: refused during the ban"
	between "$(header Retry-After)" 897 899 "$name: Retry-After counts down to the ban's end (not extended by the refusal before)"
	post /login --interface 127.0.0.3
	is "$STATUS" 404 "$name: another client is not banned"
	end=$("$show")
	now=$(($(date +%s%N) / 1000000))
	left=$(( (end - now) / 1000 ))
	between "$left" 890 900 "$name: the store shows the ban's end, $left s away"
	req "$base/rlgate/status"
	like "$BODY" '"name":"login","algorithm":"token_bucket","limit":5,"window_s":60,.*"ban_s":900,"ban_after":1' \
	    "$name: /status: the login policy's ban"
	"$RLGATE_BIN" --config "$T/$name.conf" --reset 127.0.0.1 --policy login \
	    >"$T/$name.reset" 2>&1
	like "$(cat "$T/$name.reset")" 'reset 127\.0\.0\.1: [1-9][0-9]* states? deleted' \
	    "$name: rlgate --reset 127.0.0.1 --policy login"
	post /login
	is "$STATUS" 404 "$name: the ban is lifted"
	is "$("$show")" "" "$name: the store holds no ban any more"
}

# check_otp NAME: the short ban: a token bucket of 1 a second that bans
# for 3 s; refused while the bucket would admit again (1.2 s later: 1 or
# 2 s left, as slow as the machine is), admitted at its end.
check_otp() {
	local name=$1 t0 t1
	post /otp --interface 127.0.0.4
	is "$STATUS" 404 "$name: otp: the first passes"
	post /otp --interface 127.0.0.4
	t0=$(($(date +%s%N) / 1000000))
	is "$STATUS:$(header Retry-After)" 429:3 "$name: otp: the second is refused with the ban's 3 s"
	sleep 1.2
	post /otp --interface 127.0.0.4
	is "$STATUS" 429 "$name: otp: refused 1.2 s later (the bucket would admit)"
	between "$(header Retry-After)" 1 2 "$name: otp: Retry-After: what is left of the ban"
	t1=$(($(date +%s%N) / 1000000))
	sleep_ms $((3000 - (t1 - t0) + 300))
	post /otp --interface 127.0.0.4
	is "$STATUS" 404 "$name: otp: admitted once the ban ended"
}

# ---- 1. SQLite: commit = behind, then commit = each -------------------------

for commit in behind each; do
	name=sqlite-$commit
	COMMIT=$commit write_store_conf "$name" <<<"$POLICIES"
	db=$DB
	check_conf "$name"
	start_rlgate_fcgi "$name" "$sock" "$T/$name.conf" 2 --threads 2
	# shellcheck disable=SC2317  # called by check_login
	show_sqlite() {
		[ "$commit" = behind ] && flush_table "$T/$name.conf"
		sql "$db" "SELECT ban_until_ms FROM rlg_state WHERE policy = 'login' AND client = '127.0.0.1' AND ban_until_ms > 0"
	}
	check_login "$name" show_sqlite
	# the bans view, and the closest clients of /status
	post /login --interface 127.0.0.5
	for _ in 1 2 3 4 5; do post /login --interface 127.0.0.5; done
	is "$STATUS" 429 "$name: 127.0.0.5 banned"
	[ "$commit" = behind ] && flush_table "$T/$name.conf"
	like "$(sql "$db" "SELECT policy, client, ban_left_s FROM bans")" '^login[|]127\.0\.0\.5[|](899|900)$' \
	    "$name: the sqlite3 shell's bans view"
	req "$base/rlgate/status"
	like "$BODY" '"policy":"login","client":"127\.0\.0\.5","limit":5,"remaining":0,"retry_after_s":(899|900),"reset_s":(899|900),"banned":true' \
	    "$name: /status: the banned client among the closest, banned"
	check_otp "$name"
	stop_rlgate_fcgi "$name"
	rm -f "$sock"
done

# ---- 2. Redis ---------------------------------------------------------------

# shellcheck disable=SC2119  # a free port
start_test_redis
write_store_conf redis <<EOF
backend = redis
url = redis://127.0.0.1:$RPORT
clock = local

$POLICIES
EOF
sed -i '0,/^path = /{/^path = /d}' "$T/redis.conf"  # the store's, not a route's
check_conf redis
start_rlgate_fcgi redis "$sock" "$T/redis.conf" 2 --threads 2
# show_hash CLI...: the ban's end of 127.0.0.1 under login as redis-cli
# CLI... shows it (HGET); empty for none, or 0.
# shellcheck disable=SC2317  # called by show_redis and show_cluster
show_hash() {
	local v
	v=$("$@" HGET 'rlg:{127.0.0.1}:login' ban_until_ms)
	[ "${v:-0}" = 0 ] || printf '%s' "$v"
}
# shellcheck disable=SC2317  # called by check_login
show_redis() { show_hash rcli; }
check_login redis show_redis
post /login --interface 127.0.0.5
for _ in 1 2 3 4 5; do post /login --interface 127.0.0.5; done
is "$STATUS" 429 "redis: 127.0.0.5 banned"
like "$(rcli HGETALL 'rlg:{127.0.0.5}:login' | paste -sd ' ')" \
    'refused 0 refused_start_ms [0-9]+ ban_until_ms [0-9]{13}' \
    "redis: redis-cli HGETALL shows the ban"
between "$(rcli PTTL 'rlg:{127.0.0.5}:login')" 890000 901000 \
    "redis: the key lives as long as the ban (its end rounded up to a second)"
check_otp redis
stop_rlgate_fcgi redis
rm -f "$sock"

# ---- 3. Redis Cluster -------------------------------------------------------

start_cluster
write_store_conf cluster <<EOF
backend = redis_cluster
url = redis://127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}
clock = local

$POLICIES
EOF
sed -i '0,/^path = /{/^path = /d}' "$T/cluster.conf"
check_conf cluster
start_rlgate_fcgi cluster "$sock" "$T/cluster.conf" 2 --threads 2
# shellcheck disable=SC2317  # called by check_login
show_cluster() { show_hash ccli; }
check_login cluster show_cluster
check_otp cluster
stop_rlgate_fcgi cluster
rm -f "$sock"

# ---- 4. the Authorizer role --------------------------------------------------

az=$T/az
mkdir -p "$az/htdocs"
echo "the login form" >"$az/htdocs/login"
chmod -R a+rX "$az"
COMMIT=behind write_store_conf authorizer <<<"$POLICIES"
check_conf authorizer
start_rlgate_fcgi authorizer "$az/rlgate.sock" "$T/authorizer.conf" 2 --threads 2
APORT=$(free_port) || bail_out "no free port"
start_authorizer_lighttpd "$az" "$APORT" "$az/rlgate.sock" /login </dev/null
got=
for _ in 1 2 3 4 5; do
	req -d "user=alice&password=guess" "http://127.0.0.1:$APORT/login"
	got="$got $STATUS"
done
unlike "$got" 429 "authorizer: five attempts pass the guard ($got)"
req -d "user=alice&password=guess" "http://127.0.0.1:$APORT/login"
is "$STATUS" 429 "authorizer: the sixth is refused, and starts the ban"
between "$(header Retry-After)" 899 900 "authorizer: Retry-After: the ban's 900 s"
req "http://127.0.0.1:$APORT/login"
is "$STATUS" 200 "authorizer: a GET (no route: no policy) is served"
req -d "user=alice&password=guess" "http://127.0.0.1:$APORT/login"
is "$STATUS" 429 "authorizer: the next POST is refused during the ban"
flush_table "$T/authorizer.conf"
is "$(sql "$DB" "SELECT client FROM bans WHERE policy = 'login'")" 127.0.0.1 \
    "authorizer: the bans view shows it"

done_testing
