#!/usr/bin/env bash
# Throughput of gpusched against the floor and xargs on no-op tasks, and the
# cost of a dependency hop, measured in the same run on the same machine.
#
#   bench/throughput.sh [N_TASKS] [CHAIN_LEN]     (defaults: 2000 and 200)
#
# 1. N_TASKS independent `true` tasks through `gpusched run -j P`, against
#    the floor (bench/floor: a minimal Go program that starts the same
#    commands, P at a time, each with a log file of its own in one folder,
#    and does nothing else), at P = 2 and P = 8 (JOBS="2 8" to change). Its
#    log folder is gpusched's (RUN_DIR/logs), removed before each run as
#    gpusched's is: on an ext4 without a journal, creating a file costs
#    in proportion to the files deleted lately near its folder (the kernel
#    skips recently freed inodes), and two folders in different places
#    paid up to 3x different prices for the same 2,000 files. The
#    two take turns, 3 rounds (ROUNDS=3); for each the best wall time and
#    its rate, and the median CPU (user+system) of every process of a run,
#    the supervisor and scheduler of gpusched included (bench/reap); then
#    the ratio of gpusched's rate to the floor's (goal: >= 0.9); then the
#    median wall times, and the median over the rounds of the floor's wall
#    time / gpusched's in the same round, which a slow spell on a shared
#    machine moves less than the best. With BASELINE set, that binary
#    takes its turn too. FLOOR_ONLY=1 stops here.
# 2. The same N_TASKS `true` commands through `xargs -P 2`, best of 3.
# 3. A chain of CHAIN_LEN `true` tasks, each depending on the previous one,
#    through `gpusched run -j 1`, against a shell loop that runs /bin/true
#    CHAIN_LEN times: prints the extra time per dependency hop (goal < 2 ms).
# Each measurement is the best of 3 runs (fresh run directory each time), so
# a passing hiccup on a shared machine does not decide the figure.
#
# BASELINE=path/to/another/gpusched also measures that binary on the same
# N_TASKS tasks, its runs alternating with this checkout's (in 1. and at
# -j 2 against xargs), and prints both: how a change was measured against
# the commit before it.
#
# UNSUPERVISED=1 takes as the baseline this checkout with its attempts run
# inside the scheduler (GPUSCHED_NO_SUPERVISOR=1): what the supervisor
# that lets attempts outlive the scheduler costs (docs/adoption.md).
set -euo pipefail
n=${1:-2000}
chain=${2:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
truebin=$(command -v true)
case $truebin in /*) ;; *) truebin=/bin/true ;; esac

go build -o "$work/gpusched" "$root/cmd/gpusched"
(cd "$root" && go build -o "$work/floor" ./bench/floor && go build -o "$work/reap" ./bench/reap)
if [ -n "${UNSUPERVISED:-}" ]; then
	printf '#!/bin/sh\nGPUSCHED_NO_SUPERVISOR=1 exec %s "$@"\n' "$work/gpusched" >"$work/unsupervised"
	chmod +x "$work/unsupervised"
	BASELINE=$work/unsupervised
fi

{
	echo "tasks:"
	for i in $(seq 1 "$n"); do
		printf '  - {id: t%d, args: [%s]}\n' "$i" "$truebin"
	done
} >"$work/flat.yaml"
{
	echo "tasks:"
	echo "  - {id: c1, args: [$truebin]}"
	for i in $(seq 2 "$chain"); do
		printf '  - {id: c%d, dependencies: [c%d], args: [%s]}\n' "$i" "$((i - 1))" "$truebin"
	done
} >"$work/chain.yaml"

now() { date +%s.%N; }
best() { # best of 3: prints the smallest elapsed seconds of "$@"
	local b="" s e t
	for _ in 1 2 3; do
		rm -rf "$work/run"
		s=$(now)
		"$@" >/dev/null
		e=$(now)
		t=$(echo "$e - $s" | bc -l)
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc -l)" = 1 ]; then b=$t; fi
	done
	echo "$b"
}
xargs_run() { seq 1 "$n" | xargs -P 2 -n 1 "$truebin" ; }
loop_run() { for _ in $(seq 1 "$chain"); do "$truebin"; done; }

# timed LABEL CMD...: runs CMD under reap in a fresh run directory and
# appends "LABEL WALL USER SYS" to $work/times.
timed() {
	local label=$1
	shift
	rm -rf "$work/run"
	"$work/reap" -o "$work/one" "$@" >/dev/null
	echo "$label $(cat "$work/one")" >>"$work/times"
}
median() { sort -g | awk '{ c[NR] = $1 } END { print (NR % 2) ? c[(NR + 1) / 2] : (c[NR / 2] + c[NR / 2 + 1]) / 2 }'; }
# figures LABEL: "BEST_WALL MEDIAN_CPU MEDIAN_WALL" of LABEL's runs (CPU:
# user+system).
figures() {
	local w c m
	w=$(awk -v l="$1" '$1 == l { print $2 }' "$work/times" | sort -g | head -1)
	c=$(awk -v l="$1" '$1 == l { print $3 + $4 }' "$work/times" | median)
	m=$(awk -v l="$1" '$1 == l { print $2 }' "$work/times" | median)
	echo "$w $c $m"
}
# pairs A B: the median over the rounds of B's wall time / A's in the same
# round (runs taken in turns): the ratio least moved by a change in load
# that lasts a round or more.
pairs() {
	paste <(awk -v l="$1" '$1 == l { print $2 }' "$work/times") <(awk -v l="$2" '$1 == l { print $2 }' "$work/times") |
		awk '{ print $2 / $1 }' | median
}
row() { # row NAME WALL CPU
	printf '  %-10s %6.3f s  %7.0f tasks/s  CPU %6.3f s\n' "$1" "$2" "$(echo "$n / $2" | bc -l)" "$3"
}

rounds=${ROUNDS:-3}
: >"$work/times"
for j in ${JOBS:-2 8}; do
	for _ in $(seq 1 "$rounds"); do # take turns, so that a change in load falls on all
		timed "gpusched-$j" "$work/gpusched" run "$work/flat.yaml" --run-dir "$work/run" -j "$j"
		timed "floor-$j" "$work/floor" -j "$j" -logs "$work/run/logs" -n "$n" -- "$truebin"
		if [ -n "${BASELINE:-}" ]; then
			timed "baseline-$j" "$BASELINE" run "$work/flat.yaml" --run-dir "$work/run" -j "$j"
		fi
	done
	read -r gw gc gm <<<"$(figures "gpusched-$j")"
	read -r fw fc fm <<<"$(figures "floor-$j")"
	printf 'against the floor: %d no-op tasks at -j %d, %d runs each taking turns: best wall time, median CPU of every process\n' "$n" "$j" "$rounds"
	row gpusched "$gw" "$gc"
	row floor "$fw" "$fc"
	if [ -n "${BASELINE:-}" ]; then
		read -r bw bc _ <<<"$(figures "baseline-$j")"
		row baseline "$bw" "$bc"
	fi
	printf '  ratio (gpusched rate / floor rate): %.2f   (floor CPU / gpusched CPU: %.2f)\n' "$(echo "$fw / $gw" | bc -l)" "$(echo "$fc / $gc" | bc -l)"
	printf '  median wall: gpusched %.3f s, floor %.3f s; median of the rounds'"'"' ratios: %.2f\n' "$gm" "$fm" "$(pairs "gpusched-$j" "floor-$j")"
done
[ -n "${FLOOR_ONLY:-}" ] && exit 0

if [ -n "${BASELINE:-}" ]; then
	g="" b=""
	for _ in 1 2 3; do # alternate, so that a change in load falls on both
		rm -rf "$work/run"; s=$(now); "$work/gpusched" run "$work/flat.yaml" --run-dir "$work/run" -j 2 >/dev/null; e=$(now)
		t=$(echo "$e - $s" | bc -l); if [ -z "$g" ] || [ "$(echo "$t < $g" | bc -l)" = 1 ]; then g=$t; fi
		rm -rf "$work/run"; s=$(now); "$BASELINE" run "$work/flat.yaml" --run-dir "$work/run" -j 2 >/dev/null; e=$(now)
		t=$(echo "$e - $s" | bc -l); if [ -z "$b" ] || [ "$(echo "$t < $b" | bc -l)" = 1 ]; then b=$t; fi
	done
	printf 'baseline: %d no-op tasks at -j 2, best of 3 alternating runs\n' "$n"
	printf '  this checkout %6.3f s  %7.0f tasks/s\n' "$g" "$(echo "$n / $g" | bc -l)"
	printf '  %s %6.3f s  %7.0f tasks/s\n' "$BASELINE" "$b" "$(echo "$n / $b" | bc -l)"
else
	g=$(best "$work/gpusched" run "$work/flat.yaml" --run-dir "$work/run" -j 2)
fi
x=$(best xargs_run)
printf 'throughput: %d no-op tasks at -j 2\n' "$n"
printf '  gpusched  %6.3f s  %7.0f tasks/s\n' "$g" "$(echo "$n / $g" | bc -l)"
printf '  xargs -P2 %6.3f s  %7.0f tasks/s\n' "$x" "$(echo "$n / $x" | bc -l)"
printf '  ratio (gpusched rate / xargs rate): %.2f\n' "$(echo "$x / $g" | bc -l)"

c=$(best "$work/gpusched" run "$work/chain.yaml" --run-dir "$work/run" -j 1)
l=$(best loop_run)
printf 'dependency chain of %d no-op tasks at -j 1\n' "$chain"
printf '  gpusched   %6.3f s\n' "$c"
printf '  shell loop %6.3f s\n' "$l"
printf '  extra per hop: %.2f ms\n' "$(echo "($c - $l) * 1000 / $chain" | bc -l)"
