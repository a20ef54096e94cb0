#!/usr/bin/env bash
# The time from a task's exit to the next task's start, for gpusched and
# the floor, read from the kernel's own events (needs perf, and the right
# to record tracepoints: root, or kernel.perf_event_paranoid <= -1).
#
#   bench/latency.sh [N_TASKS]          (default 2000)
#
# N_TASKS `true` tasks at -j 2 (JOBS="2 8" for more), ROUNDS runs each (3),
# gpusched and the floor taking turns (and BASELINE, another gpusched
# binary, when set). For every task that exits (sched_process_exit of a
# `true`), the time until the scheduler's next clone: what sits between one
# task's end and the next start in the same slot (the end's handling, the
# commit, the next attempt's preparation). With every slot busy, this is
# what the rate lost against the floor is made of. Prints the median, the
# 10th and the 90th percentile of each run, in microseconds.
set -euo pipefail
n=${1:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/latency.XXXXXX")
trap 'rm -rf "$work"' EXIT
truebin=$(command -v true)
case $truebin in /*) ;; *) truebin=/bin/true ;; esac
command -v perf >/dev/null || { echo "latency.sh: perf is not installed" >&2; exit 1; }

go build -o "$work/gpusched" "$root/cmd/gpusched"
(cd "$root" && go build -o "$work/floor" ./bench/floor)
{
	echo "tasks:"
	for i in $(seq 1 "$n"); do printf '  - {id: t%d, args: [%s]}\n' "$i" "$truebin"; done
} >"$work/flat.yaml"

# gaps COMM: reads `perf script` lines, prints "median p10 p90 count" of
# the time from each `true` exit to COMM's next clone.
gaps() {
	awk -v comm="$1" '
		$3 ~ /sched_process_exit/ && $1 == "true" { t = $2; sub(":", "", t); last = t + 0; have = 1; next }
		$3 ~ /sys_enter_clone/ && index($1, comm) == 1 && have { t = $2; sub(":", "", t); print (t - last) * 1e6; have = 0 }
	' | sort -g | awk '{ g[NR] = $1 } END { if (NR == 0) { print "none"; exit }
		printf "%.0f %.0f %.0f %d\n", g[int((NR + 1) / 2)], g[int(NR / 10) + 1], g[int(NR * 9 / 10)], NR }'
}

# one LABEL COMM CMD...: records CMD's exits and clones, prints LABEL's line.
one() {
	local label=$1 comm=$2
	shift 2
	rm -rf "$work/run"
	perf record -q -e sched:sched_process_exit -e syscalls:sys_enter_clone -o "$work/perf.data" -- "$@" >/dev/null 2>&1
	read -r med p10 p90 count <<<"$(perf script -i "$work/perf.data" -F comm,time,event 2>/dev/null | gaps "$comm")"
	printf '  %-9s median %5s us   p10 %5s   p90 %5s   (%s gaps)\n' "$label" "$med" "$p10" "$p90" "$count"
}

for j in ${JOBS:-2}; do
	echo "exit of a task to the next clone, $n no-op tasks at -j $j (tmp: ${TMPDIR:-/tmp}):"
	for _ in $(seq 1 "${ROUNDS:-3}"); do
		one gpusched gpusched "$work/gpusched" run "$work/flat.yaml" --run-dir "$work/run" -j "$j"
		one floor floor "$work/floor" -j "$j" -logs "$work/run/logs" -n "$n" -- "$truebin"
		if [ -n "${BASELINE:-}" ]; then
			one baseline "$(basename "$BASELINE" | cut -c1-15)" "$BASELINE" run "$work/flat.yaml" --run-dir "$work/run" -j "$j"
		fi
	done
done
