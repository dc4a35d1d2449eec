#!/usr/bin/env bash
# docs.sh: the manual holds together.
#   1. both man pages, docs/rlgate.8 and docs/rlgate.conf.5, render with
#      groff -ww -z -man (and again for a terminal, -Tutf8) without a
#      single warning;
#   2. docs/rlgate.8 describes, in OPTIONS, exactly the options that
#      `rlgate --help` prints, short and long: one missing or one too many
#      fails; any --option named anywhere in either man page is one
#      --help knows; both pages name the version `rlgate --version` prints;
#   3. every relative link of README.md, docs/*.md and tests/README.md
#      names a file that exists and, with a #fragment into a Markdown file,
#      a heading there (GitHub's anchors: lower case, punctuation dropped,
#      spaces as '-', -1, -2... for repeats) or an <a id>;
#   4. the README keeps its two Quick start commands verbatim (CI runs
#      scripts/test.sh through .ci/run, and people type them).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test groff
S=$RLGATE_SRCDIR

# --- 1. the man pages render cleanly
for page in docs/rlgate.8 docs/rlgate.conf.5; do
	[ -f "$S/$page" ] || bail_out "no $page"
	out=$( { groff -ww -z -man "$S/$page" && groff -ww -z -man -Tutf8 "$S/$page"; } 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && [ -z "$out" ]; then
		pass "$page renders without a warning (groff -ww -man)"
	else
		fail "$page renders without a warning (groff -ww -man)" "exit status $rc" "$out"
	fi
done

# --- 2. rlgate(8) and --help know the same options, and the same version

version=$("$RLGATE_BIN" --version)
for page in docs/rlgate.8 docs/rlgate.conf.5; do
	th=$(sed -n 's/^\.TH .*"\(rlgate [^"]*\)".*/\1/p' "$S/$page")
	is "$th" "$version" "$page documents $version (its .TH line)"
done

# man_text PAGE: the page without comment lines, \- as -, fonts dropped.
man_text() {
	grep -v '^\.\\"' "$1" | sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g'
}
# opts: the options (-x, --word) in the text on stdin, one per line.
opts() {
	grep -oE -- '(^|[^A-Za-z0-9-])--?[A-Za-z][A-Za-z-]*' |
	    sed -E 's/^[^-]*//' | sort -u
}

"$RLGATE_BIN" --help >"$T/help" 2>&1 || bail_out "rlgate --help failed"
# The option column of --help: lines that start with spaces and a dash,
# cut at the first run of two spaces after the option.
sed -nE 's/^ +(-.*)$/\1/p' "$T/help" | sed -E 's/  .*//' | opts >"$T/help_opts"
# The tags of rlgate(8)'s OPTIONS entries: the line after each .TP.
man_text "$S/docs/rlgate.8" |
    awk '/^\.SH /{ sec = $0; next } sec ~ /OPTIONS/ && prev == ".TP" { print } { prev = $0 }' |
    opts >"$T/man_opts"

grep -qx -- --config "$T/help_opts" && grep -qx -- --help "$T/help_opts"
ok $? "--help lists its options (--config and --help among them)"
diag "--help: $(tr '\n' ' ' <"$T/help_opts")"
while read -r o; do
	grep -qx -- "$o" "$T/man_opts"
	ok $? "rlgate(8) OPTIONS describes $o"
done <"$T/help_opts"
extra=$(comm -13 "$T/help_opts" "$T/man_opts")
is "$extra" "" "rlgate(8) OPTIONS describes no option that --help does not know"
for page in docs/rlgate.8 docs/rlgate.conf.5; do
	unknown=$(man_text "$S/$page" | grep -oE -- '--[A-Za-z][A-Za-z-]*' | sort -u |
	    comm -23 - "$T/help_opts")
	is "$unknown" "" "every --option that $page names is one --help knows"
done

# --- 3. relative links of the Markdown files

# md_body FILE: the file without fenced code blocks and `code spans`.
# shellcheck disable=SC2016  # the backquotes are Markdown's, not the shell's
md_body() {
	awk '/^[ \t]*```/ { fence = !fence; next } !fence' "$1" | sed 's/`[^`]*`//g'
}
# anchors FILE: the fragments a link may name in FILE, one per line.
anchors() {
	md_body "$1" | awk '
	/^#+[ \t]/ {
		h = $0
		sub(/^#+[ \t]+/, "", h)
		sub(/[ \t]+#*[ \t]*$/, "", h)
		h = tolower(h)
		gsub(/\[|\]\([^)]*\)/, "", h)   # [text](url) -> text
		gsub(/[^a-z0-9 _-]/, "", h)
		gsub(/ /, "-", h)
		if (h in seen) print h "-" seen[h]++
		else { seen[h] = 1; print h }
	}'
	grep -oE '<a (id|name)="[^"]+"' "$1" | sed -E 's/.*="//; s/"$//'
}

mds=(README.md tests/README.md)
for f in "$S"/docs/*.md; do
	mds+=("docs/${f##*/}")
done
for md in "${mds[@]}"; do
	[ -f "$S/$md" ] || { fail "$md exists"; continue; }
	dir=$(dirname "$S/$md")
	bad=()
	n=0
	while read -r link; do
		n=$((n + 1))
		case $link in
		http://* | https://* | mailto:*) continue ;;
		esac
		path=${link%%#*}
		frag=
		[ "$path" != "$link" ] && frag=${link#*#}
		if [ -z "$path" ]; then
			target="$S/$md"
		else
			target="$dir/$path"
		fi
		if [ ! -e "$target" ]; then
			bad+=("$link: no such file")
			continue
		fi
		if [ -n "$frag" ] && [[ $target == *.md ]] &&
		    ! anchors "$target" | grep -qxF -- "$frag"; then
			bad+=("$link: no heading or anchor #$frag in ${target#"$S"/}")
		fi
	done < <(md_body "$S/$md" | grep -oE '\]\([^) ]+\)' | sed -E 's/^\]\(//; s/\)$//')
	if [ ${#bad[@]} -eq 0 ]; then
		pass "$md: its $n links resolve"
	else
		fail "$md: its $n links resolve" "${bad[@]}"
	fi
done

# --- 4. the README's Quick start
quick=$(awk '/^## /{ on = ($0 == "## Quick start") } on' "$S/README.md")
isnt "$quick" "" "README.md has its Quick start section"
for cmd in \
    'bash scripts/demo.sh     # installs what is missing, builds, starts the demo on 127.0.0.1:8080' \
    'bash scripts/test.sh     # installs what is missing, builds, runs every test (exit 1 on any failure)'; do
	grep -qxF -- "$cmd" <<<"$quick"
	ok $? "the Quick start holds, verbatim: ${cmd%%  *}"
	script=$(awk '{ print $2 }' <<<"$cmd")
	[ -f "$S/$script" ]
	ok $? "$script exists"
done
grep -q 'scripts/test.sh' "$S/.ci/run"
ok $? ".ci/run runs scripts/test.sh, the Quick start's test command"

done_testing
