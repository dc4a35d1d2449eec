# boundary.gp: draws the "burst then steady" scenario of tests/boundary.c,
# one panel per algorithm (and the token bucket smoothing, its admitted
# counted when their held answers leave): requests admitted (green) and
# rejected (red) per second, the answers held for their turn (orange line,
# right axis), and the requests admitted in the trailing window (black line,
# right axis) against the limit (dashed).
#   gnuplot -e "dir='DATA_DIR'; out='docs/boundary.svg'" tests/boundary.gp
if (!exists("dir")) dir = "."
if (!exists("out")) out = "boundary.svg"
set terminal svg size 900,1180 dynamic font "sans,11" background rgb "white"
set output out
algs = "fixed_window sliding_window token_bucket token_bucket_b1 sliding_log token_bucket_delay"
titles = "'fixed window' 'sliding window counter' 'token bucket (GCRA), burst = limit' 'token bucket (GCRA), burst = 1' 'sliding log' 'token bucket, burst = limit, delay = 0: held for their turn (admitted counted as they leave)'"
set multiplot layout 6,1 title "limit 60 per 60 s, one client: its whole quota in the last second of a window\nand again in the first second of the next, then 4 requests/s" font ",12"
set style fill solid 1.0 noborder
set boxwidth 0.9
set xrange [50:180]
set yrange [0:62]
set y2range [0:125]
set ytics 0,20,60 nomirror
set y2tics 0,30,120
set grid y2tics lc rgb "#dddddd"
set key top right horizontal font ",9"
set lmargin 8
set rmargin 8
do for [i=1:6] {
    a = word(algs, i)
    set title word(titles, i) offset 0,-0.5
    if (i == 6) { set xlabel "seconds since the start of the first window" } else { unset xlabel }
    plot dir."/".a.".dat" using 1:($2+$3) with boxes lc rgb "#d62728" title (i == 1 ? "rejected / s" : ""), \
         ''          using 1:2 with boxes lc rgb "#2ca02c" title (i == 1 ? "admitted / s" : ""), \
         ''          using 1:4 axes x1y2 with lines lw 2 lc rgb "black" title (i == 1 ? "admitted in the last 60 s (right)" : ""), \
         60 axes x1y2 with lines dt 2 lc rgb "black" title (i == 1 ? "limit" : ""), \
         ''          using 1:5 axes x1y2 with lines lw 2 lc rgb "#ff7f0e" title (i == 1 ? "held for their turn (right)" : "")
}
unset multiplot
