#!/usr/bin/env bash
# The command line at scale: validate, resume, status and plan on 100,000
# tasks, and validate on 1,000,000 (issue 14, goals 3 and 4).
#
#   bench/scale.sh [WORK_DIR]        (default: a temporary folder, removed after)
#
# Inputs, made once in WORK_DIR (kept there when WORK_DIR is given, so a
# second call reuses them):
#   w100k.yaml  100,000 tasks, each `true` with a priority and up to two
#               random earlier tasks as dependencies (the shape of
#               docs/benchmarks.md, "Loading and validating"); every task
#               depends, through some chain, on task-000000.
#   w1m.yaml    the same shape with 1,000,000 tasks.
#   prep.yaml   w100k.yaml with every task from task-010000 on running
#               `false` instead: run once (-j 8) into run/, it leaves
#               10,000 tasks complete, about 9,000 failed and the rest
#               blocked, all 100,000 stored.
# Measured, each the best of 3: wall seconds, CPU seconds (user + system:
# on a machine shared with other work, the steadier figure) and peak
# resident memory, from /usr/bin/time:
#   validate w100k.yaml, validate w1m.yaml;
#   status and status --json on run/ (100,000 tasks);
#   plan w100k.yaml on run/;
#   resume: `run w100k.yaml` on a fresh copy of run/, from the start of the
#   process to the first "started" event (then it is interrupted); the
#   CPU of the scheduler process (which the run directory's supervisor
#   starts) is read from /proc at that moment.
# GPUSCHED=path/to/gpusched measures that binary instead of building this
# checkout (to compare two commits on the same inputs). ONLY="status plan"
# measures only those (of validate, status, plan, resume), and makes only
# the inputs they need.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${1:-}" ]; then
	work=$1
	mkdir -p "$work"
else
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
only=${ONLY:-}
want() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
bin=${GPUSCHED:-$work/gpusched}
if [ -z "${GPUSCHED:-}" ]; then
	go build -o "$bin" "$root/cmd/gpusched"
fi

gen() { # gen N FALSE_FROM: the workflow of N tasks; tasks >= FALSE_FROM run false
	python3 - "$1" "$2" <<'PY'
import random, sys
n, false_from = int(sys.argv[1]), int(sys.argv[2])
r = random.Random(1)
out = sys.stdout
out.write("tasks:\n")
for i in range(n):
    cmd = "false" if i >= false_from else "true"
    out.write(f"  - id: task-{i:06d}\n    args: [\"{cmd}\"]\n    priority: {r.randrange(10)}\n")
    if i:
        deps = sorted({r.randrange(i), r.randrange(i)})
        out.write("    dependencies: [" + ", ".join(f"task-{d:06d}" for d in deps) + "]\n")
PY
}
[ -s "$work/w100k.yaml" ] || gen 100000 100000 >"$work/w100k.yaml"
if want validate; then
	[ -s "$work/w1m.yaml" ] || gen 1000000 1000000 >"$work/w1m.yaml"
fi
[ -s "$work/prep.yaml" ] || gen 100000 10000 >"$work/prep.yaml"
if [ ! -s "$work/run/state.db" ]; then
	rm -rf "$work/run"
	"$bin" run "$work/prep.yaml" --run-dir "$work/run" -j 8 --no-progress >/dev/null 2>&1 || true
fi

now() { date +%s.%N; }
timed() { # timed LABEL CMD...: best of 3 wall seconds, best CPU seconds (user+system), the largest resident set
	local label=$1 b="" c="" m=0 t u sy k cpu
	shift
	for _ in 1 2 3; do
		/usr/bin/time -o "$work/time.out" -f '%e %U %S %M' "$@" >/dev/null 2>&1 || true
		read -r t u sy k <"$work/time.out"
		cpu=$(echo "$u + $sy" | bc -l)
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc -l)" = 1 ]; then b=$t; fi
		if [ -z "$c" ] || [ "$(echo "$cpu < $c" | bc -l)" = 1 ]; then c=$cpu; fi
		if [ "$k" -gt "$m" ]; then m=$k; fi
	done
	printf '%-30s %6.2f s wall  %6.2f s CPU  %5d MB\n' "$label" "$b" "$c" "$((m / 1024))"
}
first_start() { # "WALL CPU": seconds from the start of `run` on a copy of run/ to its first started event, and the CPU it used until then
	rm -rf "$work/resume"
	cp -a "$work/run" "$work/resume"
	local s e line cpu spid
	s=$(now)
	coproc G { exec "$bin" run "$work/w100k.yaml" --run-dir "$work/resume" -j 1 --no-progress --events - 2>/dev/null; }
	local pid=$G_PID
	while IFS= read -r line <&"${G[0]}"; do
		case $line in *'"started"'*)
			e=$(now)
			# The scheduler is a process the run directory's supervisor
			# starts for this one (docs/adoption.md); its CPU, utime and
			# stime, are fields 14 and 15 of /proc/PID/stat.
			spid=$(sed -n "s/.*scheduler \([0-9]*\) started for PID $pid\$/\1/p" "$work/resume/supervisor.log" | tail -1)
			cpu=$(sed 's/.*) //' "/proc/${spid:-$pid}/stat" | awk -v hz="$(getconf CLK_TCK)" '{ print ($12 + $13) / hz }')
			break ;;
		esac
	done
	kill -INT "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	echo "$(echo "$e - $s" | bc -l) $cpu"
}

echo "gpusched: $bin"
echo "run/: $("$bin" status --run-dir "$work/run" 2>/dev/null | head -1)"
if want validate; then
	timed "validate w100k.yaml" "$bin" validate "$work/w100k.yaml"
	timed "validate w1m.yaml" "$bin" validate "$work/w1m.yaml"
fi
if want status; then
	timed "status (100k)" "$bin" status --run-dir "$work/run"
	timed "status --json (100k)" "$bin" status --json --run-dir "$work/run"
fi
if want plan; then
	timed "plan (100k)" "$bin" plan "$work/w100k.yaml" --run-dir "$work/run"
fi
want resume || exit 0
b="" c=""
for _ in 1 2 3; do
	read -r t cpu < <(first_start)
	if [ -z "$b" ] || [ "$(echo "$t < $b" | bc -l)" = 1 ]; then b=$t; fi
	if [ -z "$c" ] || [ "$(echo "$cpu < $c" | bc -l)" = 1 ]; then c=$cpu; fi
done
printf '%-30s %6.2f s wall  %6.2f s CPU\n' "resume to first start (100k)" "$b" "$c"
