#!/usr/bin/env bash
# plot.sh TSV SVG: draws the end-to-end benchmark (tests/bench/e2e.sh's
# TSV: server scenario kind pair reqs_per_s p50_ms p99_ms, one row per run)
# as one SVG with gnuplot: per scenario, the median requests/s of rlgate
# and of the no-op ceiling side by side (left axis), and rlgate's median
# p99 latency (right axis).
set -euo pipefail
tsv=${1:?usage: plot.sh TSV SVG}
svg=${2:?usage: plot.sh TSV SVG}
command -v gnuplot >/dev/null 2>&1 || { echo "plot.sh: gnuplot is not installed" >&2; exit 1; }
dat=$(mktemp)
trap 'rm -f "$dat"' EXIT

# median per (server, scenario, kind) of columns 5 (req/s) and 7 (p99)
awk -F'\t' '
	/^#/ || NF < 7 { next }
	{
		k = $1 "\t" $2
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		i = ++cnt[k, $3]
		rps[k, $3, i] = $5
		p99[k, $3, i] = $7
	}
	function median(arr, k, kind, m,    i, j, t, v) {
		for (i = 1; i <= m; i++) v[i] = arr[k, kind, i] + 0
		for (i = 2; i <= m; i++)
			for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
				t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
			}
		return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
	}
	END {
		for (i = 1; i <= n; i++) {
			k = order[i]
			split(k, f, "\t")
			label = (f[1] == "nginx" ? f[2] : f[2])
			gsub(/_/, " ", label)
			printf "\"%s\"\t%.0f\t%.0f\t%.2f\n", label,
			    median(rps, k, "rlgate", cnt[k, "rlgate"]),
			    median(rps, k, "noop", cnt[k, "noop"]),
			    median(p99, k, "rlgate", cnt[k, "rlgate"])
		}
	}' "$tsv" >"$dat"
[ -s "$dat" ] || { echo "plot.sh: no runs in $tsv" >&2; exit 1; }

gnuplot <<EOF
set terminal svg size 1100,540 dynamic font "sans,11"
set output "$svg"
set title "rlgate against the no-op FastCGI ceiling (medians; wrk -c16, 2 cores)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel "requests/s"
set y2label "rlgate p99 latency (ms)"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set xtics rotate by -35 scale 0 font ",9"
set key above horizontal
set bmargin 10
set rmargin 12
set grid ytics
plot "$dat" using 2:xtic(1) title "rlgate req/s" lc rgb "#2b6cb0", \
     "" using 3 title "no-op req/s" lc rgb "#a0aec0", \
     "" using 0:4 axes x1y2 with linespoints pt 7 lc rgb "#c53030" title "rlgate p99 (ms)"
EOF
echo "plot.sh: wrote $svg"
