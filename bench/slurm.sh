#!/usr/bin/env bash
# gpusched's Slurm executor against what people do without it, on the Slurm
# that SLURM_CONF names (../shared/slurm-local.sh up brings up a one-node
# one): N no-op tasks (/bin/true), run
#
#   a. by gpusched run --executor slurm -j N (submitted held, released,
#      followed by one squeue per round and the result files);
#   b. as a loop of `sbatch --wait --wrap true`, one after the other;
#   c. as N `sbatch --wait --wrap true` started at once, then waited for.
#
# For each it prints the wall time, and the calls of Slurm's programs per
# task, counted by a shim on PATH that logs each call and runs the real
# program. sbatch --wait asks the controller about its job in a loop of its
# own (after 2 s, then 8 s, then every 32 s), which a shim cannot see: the
# RPCs slurmctld served meanwhile (sdiag, as root; every user's, so other
# load on the cluster counts too: phase 0 measures it) are printed as
# well, by message type.
#
#   bench/slurm.sh [N]     (default 50)
set -euo pipefail
n=${1:-50}
: "${SLURM_CONF:?set SLURM_CONF (../shared/slurm-local.sh up, then export SLURM_CONF=/tmp/slurm-local/etc/slurm.conf)}"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
truebin=/bin/true
[ -x "$truebin" ] || truebin=/usr/bin/true

go build -o "$work/gpusched" "$root/cmd/gpusched"

# The counting shim: each Slurm program, first in PATH, logs its call and
# runs the real one.
mkdir "$work/shim"
for p in sbatch squeue scontrol scancel sacct; do
	real=$(command -v "$p") || continue
	printf '#!/bin/sh\necho "%s $*" >>"%s/calls.log"\nexec %s "$@"\n' "$p" "$work" "$real" >"$work/shim/$p"
	chmod +x "$work/shim/$p"
done
export PATH="$work/shim:$PATH"

rpcs() { # "TYPE COUNT" per RPC type slurmctld served so far; nothing if sdiag cannot tell
	sdiag 2>/dev/null | awk '/by message type/ {f = 1; next} /by user/ {f = 0}
		f && /count:/ {c = $0; sub(/.*count:/, "", c); split(c, a, " "); print $1, a[1]}' | sort || true
}
now() { date +%s.%N; }

measure() { # NAME CMD...: runs CMD, prints its wall time, calls and RPCs per task
	local name=$1 s e before others
	shift
	others=$(squeue -h -t PD,R,CG 2>/dev/null | wc -l)
	before=$(rpcs)
	: >"$work/calls.log"
	echo "== $name: $n tasks ($others other jobs in the queue)"
	s=$(now)
	"$@"
	e=$(now)
	printf '   wall %.1f s (%.2f s a task)\n' "$(echo "$e - $s" | bc)" "$(echo "($e - $s) / $n" | bc -l)"
	awk -v n="$n" '{k = $1; if ($1 == "scontrol") k = $1 " " $2; c[k]++; t++}
		END {for (k in c) printf "   %-18s %5d  %5.2f a task\n", k, c[k], c[k] / n
		     printf "   %-18s %5d  %5.2f a task (programs run)\n", "all", t, t / n}' "$work/calls.log" | sort
	[ -n "$before" ] || return 0 # sdiag cannot be read (not root)
	join -a 2 -e 0 -o '0,1.2,2.2' <(echo "$before") <(rpcs) | awk -v n="$n" '
		$3 - $2 > 0 && $1 != "REQUEST_STATS_INFO" {printf "   rpc %-32s %5d  %5.2f a task\n", $1, $3 - $2, ($3 - $2) / n; t += $3 - $2}
		END {printf "   rpc %-32s %5d  %5.2f a task (slurmctld, every user)\n", "all", t, t / n}'
}

{
	echo "tasks:"
	for i in $(seq 1 "$n"); do
		printf '  - {id: t%d, args: [%s]}\n' "$i" "$truebin"
	done
} >"$work/wf.yaml"

gpusched_run() {
	(cd "$work" && ./gpusched run wf.yaml --executor slurm -j "$n" --run-dir "$work/run" --no-progress >"$work/run.out" 2>&1) ||
		{ cat "$work/run.out" >&2; return 1; }
}
sbatch_loop() {
	for _ in $(seq 1 "$n"); do
		sbatch --wait --quiet --output=/dev/null --chdir="$work" --wrap "$truebin"
	done
}
sbatch_parallel() {
	local pids=()
	for _ in $(seq 1 "$n"); do
		sbatch --wait --quiet --output=/dev/null --chdir="$work" --wrap "$truebin" &
		pids+=($!)
	done
	wait "${pids[@]}"
}

# What the cluster serves without us, for as long as the gpusched run
# takes at most: the noise in the RPC figures below.
idle() { sleep 20; }
measure "0. nothing of ours, 20 s (other users' load)" idle
measure "a. gpusched run --executor slurm -j $n" gpusched_run
measure "b. a loop of sbatch --wait" sbatch_loop
measure "c. $n sbatch --wait at once" sbatch_parallel
