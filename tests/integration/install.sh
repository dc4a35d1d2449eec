#!/usr/bin/env bash
# install.sh: `make install` gives an rlgate that works as installed. A
# build configured with --prefix in a temporary directory is installed
# there: the binary, both man pages, the www/ snippets, a config at
# SYSCONFDIR/rlgate.conf (the example, its database in the state
# directory) and the state directory LOCALSTATEDIR/lib/rlgate. The
# installed rlgate finds that config without --config and passes
# --check-config; started by spawn-fcgi on it, it answers 200 through
# lighttpd. A second
# install keeps a config the operator changed; uninstall removes what it
# installed, but not a changed config. --check-config refuses the install
# once the state directory is gone. A staged install for another prefix
# (make install DESTDIR=... prefix=/opt/x) writes that prefix into every
# text it installs: snippets, example config, man pages, units.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test make lighttpd spawn-fcgi curl timeout
[ -n "${RLGATE_DISTCHECK:-}" ] &&
	skip_all "under make distcheck, which installs and uninstalls the tarball itself"

prefix="$T/prefix"
mkdir -p "$T/build"
# unoptimized: what is checked is where things go, not how fast they run
(cd "$T/build" && "$RLGATE_SRCDIR/configure" --prefix="$prefix" \
    CFLAGS="-O0 -g0" >"$T/configure.log" 2>&1) ||
	bail_out "configure failed: $(tail -5 "$T/configure.log")"
timeout 600 make -C "$T/build" -j2 >"$T/make.log" 2>&1 ||
	bail_out "make failed: $(tail -5 "$T/make.log")"
timeout 120 make -C "$T/build" install >"$T/install.log" 2>&1
is "$?" 0 "make install into --prefix: exit 0"

bin="$prefix/bin/rlgate"
conf="$prefix/etc/rlgate.conf"
state="$prefix/var/lib/rlgate"
missing=
for f in "$bin" "$prefix/share/man/man8/rlgate.8" "$prefix/share/man/man5/rlgate.conf.5" \
    "$prefix/share/rlgate/www/lighttpd/rlgate.conf" "$prefix/share/rlgate/www/rlgate.conf.example" \
    "$conf"; do
	[ -f "$f" ] || missing="$missing ${f#"$prefix"/}"
done
is "${missing# }" "" "installed: the binary, the man pages, the snippets, the config"
ok "$([ -d "$state" ]; echo $?)" "installed: the state directory var/lib/rlgate"
is "$(stat -c %a "$conf")" 644 "the config is 0644"
is "$(grep '^path = .*\.db$' "$conf")" "path = $state/rlgate.db" \
    "the config's database is in the state directory"

# the installed rlgate, without --config: the installed config
out=$(env -u RLGATE_CONFIG "$bin" --check-config 2>&1)
is "$?" 0 "installed rlgate --check-config: exit 0"
like "$out" "^.*$conf: configuration ok\$" "... reads the installed config"
make_rundir
# spawn-fcgi, lighttpd as lib.sh starts them, the installed binary
RLGATE_BIN_SAVED=$RLGATE_BIN
RLGATE_BIN=$bin
start_rlgate_fcgi installed "$sock" "$conf" 1 --threads 1
RLGATE_BIN=$RLGATE_BIN_SAVED
demo_lighttpd
req "$url"
is "$STATUS" 200 "the installed rlgate answers 200 through lighttpd"
ok "$([ -f "$state/rlgate.db" ]; echo $?)" "... with its database in the state directory"
stop_rlgate_fcgi installed

# a changed config survives another install and the uninstall
printf '\n; changed by the operator\n' >>"$conf"
timeout 120 make -C "$T/build" install >"$T/install2.log" 2>&1
is "$?" 0 "make install again: exit 0"
like "$(cat "$T/install2.log")" "rlgate.conf exists: kept" "... says the config is kept"
is "$(tail -1 "$conf")" "; changed by the operator" "... and keeps the operator's config"
timeout 120 make -C "$T/build" uninstall >"$T/uninstall.log" 2>&1
is "$?" 0 "make uninstall: exit 0"
ok "$([ ! -e "$bin" ]; echo $?)" "... removes the binary"
ok "$([ -f "$conf" ]; echo $?)" "... keeps the changed config"
ok "$([ -d "$state" ]; echo $?)" "... and the state directory that holds a database"

# an unchanged config goes with the uninstall; a missing state directory
# is a problem for --check-config
rm -f "$conf" "$state"/rlgate.db*
timeout 120 make -C "$T/build" install >"$T/install3.log" 2>&1
rmdir "$state"
out=$(env -u RLGATE_CONFIG "$bin" --check-config 2>&1)
is "$?" 78 "the state directory removed: --check-config exits 78"
like "$out" "directory $state does not exist: create it" "... and names it"
timeout 120 make -C "$T/build" uninstall >"$T/uninstall2.log" 2>&1
ok "$([ ! -e "$conf" ]; echo $?)" "make uninstall removes the config it installed, unchanged"
left=$(find "$prefix" -type f | sed "s|^$prefix/||" | tr '\n' ' ')
is "$left" "" "nothing installed is left"

# the texts an operator reads name this install's directories, made at
# build time from templates: a staged install for another prefix names
# that prefix, never the default's /usr/local nor a bare /etc/rlgate.conf
dest="$T/dest"
timeout 300 make -C "$T/build" install DESTDIR="$dest" prefix=/opt/x >"$T/install-dest.log" 2>&1
is "$?" 0 "make install DESTDIR=... prefix=/opt/x: exit 0"
bad=$(grep -rIlE '/usr/local|(^|[^[:alnum:]_./-])/etc/rlgate\.conf' "$dest" | sed "s|^$dest||" | tr '\n' ' ')
is "${bad% }" "" "... no installed text names /usr/local or /etc/rlgate.conf"
x="$dest/opt/x"
grep -qxF '#        include "/opt/x/share/rlgate/www/lighttpd/rlgate.conf"' "$x/share/rlgate/www/lighttpd/rlgate.conf"
ok $? "... the lighttpd snippet says: include \"/opt/x/share/rlgate/www/lighttpd/rlgate.conf\""
grep -qF "exec /opt/x/bin/rlgate" "$x/share/rlgate/www/apache/rlgate.conf"
ok $? "... the Apache snippet starts /opt/x/bin/rlgate"
is "$(grep '^path = .*\.db$' "$x/etc/rlgate.conf")" "path = /opt/x/var/lib/rlgate/rlgate.db" \
    "... the config keeps its database in /opt/x/var/lib/rlgate"
is "$(grep '^path = .*\.db$' "$x/share/rlgate/www/rlgate.conf.example")" \
    "path = /opt/x/var/lib/rlgate/rlgate.db" "... and so does the example"
grep -qxF '.I /opt/x/etc/rlgate.conf' "$x/share/man/man8/rlgate.8"
ok $? "... rlgate(8) FILES: /opt/x/etc/rlgate.conf"
grep -qxF '.I /opt/x/share/rlgate/www/rlgate.conf.example' "$x/share/man/man5/rlgate.conf.5"
ok $? "... rlgate.conf(5) FILES: /opt/x/share/rlgate/www/rlgate.conf.example"
grep -qxF 'ExecStart=/opt/x/bin/rlgate --config /opt/x/etc/rlgate.conf --processes 2 --threads 4' \
    "$x/share/rlgate/systemd/rlgate.service"
ok $? "... the example unit runs /opt/x/bin/rlgate --config /opt/x/etc/rlgate.conf"

done_testing
