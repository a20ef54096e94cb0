#!/usr/bin/env bash
# Checks gpusched against a real NVIDIA GPU: real nvidia-smi output, real
# CUDA allocations made by PyTorch, real out-of-memory errors.
#
#   scripts/real-gpu-check.sh [--gpusched BIN] [--only 1,3] [--budget SECONDS] OUT
#   scripts/real-gpu-check.sh --dry-run [--fake-smi BIN] [--fake-job BIN] ... OUT
#
# It needs nvidia-smi (or $GPUSCHED_NVIDIA_SMI), python3 with PyTorch built
# for CUDA, and a gpusched binary: --gpusched, else ./gpusched at the root
# of the checkout, else gpusched on PATH (build it with
# "CGO_ENABLED=0 go build -o gpusched ./cmd/gpusched"). No Go, no network.
# Without a GPU (no nvidia-smi, or nvidia-smi fails) it says so and exits 0
# without checking anything.
#
# It uses one card, the one with the most free memory, and sizes every
# allocation from that card's memory as nvidia-smi reports it at run time.
# The checks (docs/gpu.md, "Checking on a real GPU", says what each proves):
#
#   1 gpus --live    gpusched gpus --live --json reads every card as
#                    nvidia-smi does (name, uuid, total, used, free), idle and
#                    with a process on the card; measures the CUDA context
#   2 packing        more tasks than fit at once, each allocating a real
#                    tensor: as many run at once as fit, no CUDA OOM, status
#                    shows the charges, the report draws them
#   3 reconciliation a task declaring 10 GiB that allocates 50 GiB (scaled to
#                    the card) is charged what nvidia-smi's compute-apps says
#                    it uses and keeps another task off the card
#   4 foreign        a process started outside gpusched holding 60 GiB (scaled)
#                    is respected: what fits beside it runs, what does not waits
#   5 out of memory  PyTorch's real OOM is recognised: a task that outgrows
#                    its budget is retried with the documented larger one; one
#                    larger than the card fails with "no retry"
#   6 CUDA env       CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER as torch.cuda
#                    sees them name the card gpusched chose; CPU tasks see none
#
# Every check prints PASS, FAIL or SKIP with its figures; a summary ends the
# run. Exit status: 0 when no check failed (or there is no GPU), 1 when one
# failed, 2 for a bad command line or no gpusched binary to run.
#
# Everything it captures goes under OUT: check.log (what it printed),
# summary.txt, env/ (versions, nvidia-smi's own view), nvidia-smi/ (the raw
# CSV of both queries gpusched makes, idle and under load, for testdata),
# and per check checkN-*/: the workflow, gpusched's output, --events,
# status --json (final and sampled while it ran, with nvidia-smi beside each
# sample), the report HTML, the tasks' logs (run/logs).
#
# --dry-run runs the same checks against the project's fakes instead of a
# driver and PyTorch: $GPUSCHED_NVIDIA_SMI (else --fake-smi, else a
# fake-nvidia-smi built with go into OUT/bin) driven by $FAKE_GPU_STATE (else
# a state file it writes: two fake H200s, one partly used by someone else),
# and cmd/fake-gpu-job (--fake-job) as the tasks' allocator. It is how the
# script itself is tested where there is no GPU; what only a real driver
# can show (the CUDA context's memory, torch's own messages and device
# UUID) is reported SKIP there.
#
# --only runs some checks (check 1 is cheap and measures the context
# overhead the others allow for; without it they assume 1024 MiB).
# --budget (default 280 s) bounds the whole run: a check that would not
# finish in what is left is not started, a workflow still running when it
# is spent is stopped (SIGINT, as Ctrl-C); either counts as failed.

set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
jsonflat_awk="$here/lib/jsonflat.awk"

margin=512 # gpu_safety_margin_mib, set in every workflow below
gpu_query="--query-gpu=index,uuid,name,memory.total,memory.used,memory.free"
apps_query="--query-compute-apps=pid,gpu_uuid,used_memory"
oom_re='CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|RESOURCE_EXHAUSTED: Out of memory'

# usage [STATUS]: the synopsis, on stderr unless STATUS is 0 (--help).
usage() {
	local status=${1:-2}
	{
		sed -n '2,/^$/s/^# \{0,1\}//p' "$self" | sed -n '1,6p'
		echo "see the top of $self for the checks and options"
	} >&$((status == 0 ? 1 : 2))
	exit "$status"
}

die() {
	echo "real-gpu-check: $*" >&2
	exit 2
}

# ---------------------------------------------------------------- JSON, CSV

# jflat FILE...: every scalar of the JSON in FILE as "path<TAB>value".
jflat() { awk -f "$jsonflat_awk" "$@"; }

# jget FLAT PATH: the value at PATH; fails when there is none.
jget() {
	awk -F'\t' -v p="$2" '$1 == p { print $2; found = 1; exit } END { exit !found }' "$1"
}

# jidx FLAT ARRAY KEY VALUE: the first index i with ARRAY.i.KEY == VALUE.
jidx() {
	awk -F'\t' -v a="$2." -v k="$3" -v v="$4" '
		index($1, a) == 1 && $2 == v {
			rest = substr($1, length(a) + 1); i = rest; sub(/\..*/, "", i)
			if (rest == i "." k) { print i; found = 1; exit }
		}
		END { exit !found }' "$1"
}

# task_get FLAT TASK FIELD: FIELD of TASK in a flattened status --json
# (FIELD may go deeper: history.0.mem_peak_mib).
task_get() {
	local i
	i=$(jidx "$1" tasks id "$2") || return 1
	jget "$1" "tasks.$i.$3"
}

# card_get FLAT FIELD: FIELD of the chosen card in a flattened status --json
# (gpus) or gpus --json (cards).
card_get() {
	local i arr
	for arr in gpus cards; do
		if i=$(jidx "$1" "$arr" uuid "$card_uuid"); then
			jget "$1" "$arr.$i.$2"
			return
		fi
	done
	return 1
}

# holder_get FLAT TASK FIELD: FIELD of TASK's holding on the chosen card.
holder_get() {
	local c h
	c=$(jidx "$1" gpus uuid "$card_uuid") || return 1
	h=$(jidx "$1" "gpus.$c.tasks" task "$2") || return 1
	jget "$1" "gpus.$c.tasks.$h.$3"
}

# ev_table FLAT: one line per event of a flattened --events file:
# seq<TAB>event<TAB>task<TAB>attempt.
ev_table() {
	awk -F'\t' '
		function flush() { if (cur != "") print cur "\t" ev "\t" tk "\t" at }
		{
			d = $1; sub(/\..*/, "", d); k = substr($1, length(d) + 2)
			if (d != cur) { flush(); cur = d; ev = ""; tk = ""; at = "" }
			if (k == "event") ev = $2; else if (k == "task") tk = $2; else if (k == "attempt") at = $2
		}
		END { flush() }' "$1"
}

# ev_seq EVTABLE EVENT TASK [ATTEMPT]: the sequence number of the first such
# event, or nothing.
ev_seq() {
	awk -F'\t' -v e="$2" -v t="$3" -v a="${4:-}" \
		'$2 == e && $3 == t && (a == "" || $4 == a) { print $1; exit }' "$1"
}

# max_running EVTABLE TASKREGEX: the most attempts of matching tasks running
# at once, by the order of started and attempt-ended events.
max_running() {
	awk -F'\t' -v re="$2" '
		$3 ~ re && $2 == "started" { n++; if (n > m) m = n }
		$3 ~ re && $2 == "attempt-ended" { n-- }
		END { print m + 0 }' "$1"
}

# smi_cards CSV: the rows of a GPUQuery capture as
# index<TAB>uuid<TAB>name<TAB>total<TAB>used<TAB>free (MiB, units dropped).
# Columns are taken by position (the query fixes them); a name may hold ", ".
smi_cards() {
	awk -F', ' '
		function mib(s) { sub(/ *MiB$/, "", s); return s }
		NR > 1 && NF >= 6 && $1 ~ /^[0-9]+$/ {
			name = $3; for (i = 4; i <= NF - 3; i++) name = name ", " $i
			print $1 "\t" $2 "\t" name "\t" mib($(NF-2)) "\t" mib($(NF-1)) "\t" mib($NF)
		}' "$1"
}

# smi_apps CSV: the rows of an AppsQuery capture as pid<TAB>uuid<TAB>used.
smi_apps() {
	awk -F', ' '
		function mib(s) { sub(/ *MiB$/, "", s); return s }
		NR > 1 && NF >= 3 && $1 ~ /^[0-9]+$/ { print $1 "\t" $2 "\t" mib($NF) }' "$1"
}

# int VALUE: VALUE when it is a whole number, else 0 (a JSON null, "[N/A]",
# nothing), so that arithmetic on what other programs printed cannot break.
int() {
	if [[ $1 =~ ^-?[0-9]+$ ]]; then echo "$1"; else echo 0; fi
}

# smi gpu|apps: runs one of gpusched's two queries, as gpusched does.
smi() {
	local q=$gpu_query
	[[ $1 == apps ]] && q=$apps_query
	timeout -k 2 20 "$smi_bin" "$q" --format=csv
}

# pid_used PID: what the chosen card's compute-apps says PID uses (MiB), or
# nothing when it is not listed.
pid_used() {
	smi apps 2>/dev/null >"$tmp/apps.csv"
	smi_apps "$tmp/apps.csv" | awk -F'\t' -v p="$1" -v u="$card_uuid" '$1 == p && $2 == u { print $3; exit }'
}

# card_free: the chosen card's memory.free now (MiB; 0 when it cannot be
# read).
card_free() {
	smi gpu 2>/dev/null >"$tmp/gpu.csv"
	int "$(smi_cards "$tmp/gpu.csv" | awk -F'\t' -v u="$card_uuid" '$2 == u { print $6; exit }')"
}

# ---------------------------------------------------------------- output

say() {
	printf '%s\n' "$*"
	printf '%s\n' "$*" >>"$out/check.log"
}

n_pass=0 n_fail=0 n_skip=0

# result ID STATUS TEXT: one line of the verdict (STATUS PASS, FAIL, SKIP).
result() {
	local line
	line=$(printf '%-4s %-8s %s' "$2" "$1" "$3")
	say "$line"
	printf '%s\n' "$line" >>"$out/summary.txt"
	case $2 in
	PASS) n_pass=$((n_pass + 1)) ;;
	FAIL) n_fail=$((n_fail + 1)) ;;
	SKIP) n_skip=$((n_skip + 1)) ;;
	esac
}

# A check collects what went wrong with want, then reports with verdict.
fails=()
begin_check() { fails=(); }
# want CONDITION-STATUS MESSAGE: records MESSAGE when the status is non-zero.
# Use as: [[ ... ]]; want $? "message"
want() { [[ $1 == 0 ]] || fails+=("$2"); }
verdict() { # ID NAME FIGURES
	if ((${#fails[@]} == 0)); then
		result "$1" PASS "$2: $3"
	else
		local why
		why=$(printf '%s; ' "${fails[@]}")
		result "$1" FAIL "$2: ${why%; } [$3]"
	fi
}

# ---------------------------------------------------------------- the allocator seam

# alloc_argv MIB HOLD [GROW_TO GROW_AFTER] [--report]: sets argv to the
# command that allocates MIB MiB on the first visible device, holds it for
# HOLD seconds (grows to GROW_TO after GROW_AFTER) and prints
# "... pid=P gpu=UUID mem=N" once it holds it: scripts/gpu-alloc.py with
# PyTorch, or the fake GPU job in a dry run. Both print PyTorch's
# "CUDA out of memory. Tried to allocate ..." when the card has no room.
argv=()
alloc_argv() {
	local mib=$1 hold=$2 grow=${3:-0} after=${4:-0} report=${5:-}
	if ((dry)); then
		argv=("$fake_job" --mem "$mib" --duration "${hold}s")
		((grow > 0)) && argv+=(--grow-to "$grow" --grow-after "${after}s")
	else
		argv=(python3 -u "$here/gpu-alloc.py" --mib "$mib" --hold "$hold")
		((grow > 0)) && argv+=(--grow-to "$grow" --grow-after "$after")
		[[ $report == --report ]] && argv+=(--report-device)
	fi
	return 0
}

# yaml_list WORD...: a YAML flow sequence of double-quoted strings, each
# ${ written $${ (a workflow substitutes ${name} and reads $${ as ${).
yaml_list() {
	local s o=""
	for s in "$@"; do
		s=${s//'${'/'$${'}
		s=${s//\\/\\\\}
		s=${s//\"/\\\"}
		o+="${o:+, }\"$s\""
	done
	printf '[%s]' "$o"
}

# alloc_yaml MIB HOLD [GROW_TO GROW_AFTER] [--report]: alloc_argv as YAML.
alloc_yaml() {
	alloc_argv "$@"
	yaml_list "${argv[@]}"
}

# envdump_yaml MIB HOLD: a task that prints the CUDA and GPUSCHED_GPU
# variables ("env NAME=VALUE", <unset> when unset), then allocates as
# alloc_argv does with --report and prints "alloc exit=N".
envdump_yaml() {
	alloc_argv "$1" "$2" 0 0 --report
	local v script=""
	for v in CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER GPUSCHED_GPU_INDEX GPUSCHED_GPU_UUID GPUSCHED_GPU_MEMORY_MIB; do
		script+="printf 'env %s=%s\\n' $v \"\${$v-<unset>}\"; "
	done
	script+='"$@"; echo "alloc exit=$?"'
	yaml_list sh -c "$script" sh "${argv[@]}"
}

# scheduling_yaml [EXTRA...]: the scheduling block every check uses: only
# the chosen card, polled often, short cooldown, explicit margin, and no
# quarantine (a check's failing tasks would otherwise lock its only card
# for ten minutes, and the check would wait that out).
scheduling_yaml() {
	cat <<EOF
scheduling:
  max_parallel_tasks: 16
  visible_gpus: ["$card_uuid"]
  gpu_safety_margin_mib: $margin
  gpu_poll_interval: $poll
  gpu_cooldown: 1s
  timeout: ${task_timeout}s
  kill_grace: 3s
  retry_delay: 0s
  gpu_quarantine_after: 0
EOF
	local l
	for l in "$@"; do echo "  $l"; done
}

# ---------------------------------------------------------------- running a workflow

sampler_pid=""

# start_sampler DIR: every $sample_every, saves status --json and both
# nvidia-smi queries under DIR/samples (numbered alike), until stop_sampler.
start_sampler() {
	local d=$1
	mkdir -p "$d/samples"
	rm -f "$d/samples/.stop"
	(
		i=0
		while [[ ! -e $d/samples/.stop ]]; do
			i=$((i + 1))
			n=$(printf '%03d' "$i")
			"$gpusched" status --run-dir "$d/run" --json >"$d/samples/status-$n.json" 2>/dev/null || rm -f "$d/samples/status-$n.json"
			smi apps >"$d/samples/apps-$n.csv" 2>&1
			smi gpu >"$d/samples/gpu-$n.csv" 2>&1
			sleep "$sample_every"
		done
	) &
	sampler_pid=$!
}

stop_sampler() {
	local d=$1
	[[ -n $sampler_pid ]] || return 0
	touch "$d/samples/.stop"
	wait "$sampler_pid" 2>/dev/null
	sampler_pid=""
	local f
	for f in "$d"/samples/status-*.json; do
		[[ -e $f ]] || continue
		jflat "$f" >"${f%.json}.flat" 2>/dev/null || rm -f "${f%.json}.flat"
	done
}

# run_check_workflow DIR: runs DIR/workflow.yaml with its run directory in
# DIR/run, sampling as it goes, bounded by $run_timeout; then saves status,
# the events table and the report. Sets run_rc.
run_rc=0
run_check_workflow() {
	local d=$1 limit=$run_timeout
	# Within the budget: what is left of it, at least 10s.
	((budget - SECONDS < limit)) && limit=$((budget - SECONDS))
	((limit < 10)) && limit=10
	start_sampler "$d"
	timeout -s INT -k 20 "$limit" "$gpusched" run "$d/workflow.yaml" --run-dir "$d/run" \
		--events "$d/events.jsonl" --no-progress >"$d/run.out" 2>&1
	run_rc=$?
	stop_sampler "$d"
	"$gpusched" status --run-dir "$d/run" --json >"$d/status.json" 2>"$d/status.err"
	jflat "$d/status.json" >"$d/status.flat" 2>>"$d/status.err"
	jflat -v stream=1 "$d/events.jsonl" >"$d/events.flat" 2>>"$d/status.err"
	ev_table "$d/events.flat" >"$d/events.tsv"
	"$gpusched" report --run-dir "$d/run" -o "$d/report.html" >/dev/null 2>>"$d/status.err"
	if ((run_rc == 124 || run_rc == 137)); then
		fails+=("gpusched run did not finish within ${limit}s (stopped)")
	fi
	return 0
}

# states_of FLAT TASK...: "task=state/attempts" for each task.
states_of() {
	local f=$1 t o=""
	shift
	for t in "$@"; do
		o+="${o:+ }$t=$(task_get "$f" "$t" state || echo '?')/$(task_get "$f" "$t" attempts || echo '?')"
	done
	printf '%s' "$o"
}

# want_complete FLAT TASK...: every task complete.
want_complete() {
	local f=$1 t s
	shift
	for t in "$@"; do
		s=$(task_get "$f" "$t" state)
		[[ $s == complete ]]
		want $? "task $t is ${s:-missing}, want complete ($(task_get "$f" "$t" error 2>/dev/null))"
	done
}

# ooms_in DIR: the logs under DIR/run/logs that show an out-of-memory error.
ooms_in() {
	grep -rlE "$oom_re" "$1/run/logs" 2>/dev/null | sed "s|^$1/run/logs/||" | tr '\n' ' '
}

# wait_card_quiet: waits (up to 30s) until no process holds memory on the
# chosen card, then sets free and avail (what a task may be promised).
wait_card_quiet() {
	local i
	for ((i = 0; i < 60; i++)); do
		smi apps >"$tmp/apps.csv" 2>/dev/null
		if ! smi_apps "$tmp/apps.csv" | awk -F'\t' -v u="$card_uuid" '$2 == u { found = 1 } END { exit !found }'; then
			break
		fi
		sleep 0.5
	done
	free=$(card_free)
	avail=$((free - margin))
}

# start_outside MIB OUTFILE: starts the allocator on the chosen card as a
# process gpusched knows nothing of, holding MIB MiB, and waits (up to
# $startup_wait) until it says it holds the memory. Sets outside_pid, and
# outside_drop (how much the card's free memory fell: tensor and CUDA
# context) and outside_listed (what compute-apps says the PID uses, empty
# when it does not list it, e.g. from another PID namespace). Fails when the
# process dies or never gets there.
outside_pid="" outside_drop="" outside_listed=""
start_outside() {
	local mib=$1 log=$2 free0 deadline=$((SECONDS + startup_wait))
	free0=$(card_free)
	alloc_argv "$mib" 600
	CUDA_VISIBLE_DEVICES=$card_uuid CUDA_DEVICE_ORDER=PCI_BUS_ID "${argv[@]}" >"$log" 2>&1 &
	outside_pid=$!
	while ! grep -qE ' pid=[0-9]+ gpu=' "$log"; do
		if pid_gone "$outside_pid" || ((SECONDS >= deadline)); then
			fails+=("the allocator started outside gpusched (pid $outside_pid) did not hold $mib MiB within ${startup_wait}s: $(tail -n 1 "$log")")
			stop_pid "$outside_pid"
			return 1
		fi
		sleep 0.2
	done
	local free1
	free1=$(card_free)
	outside_drop=$((free0 - free1))
	outside_listed=$(pid_used "$outside_pid")
	return 0
}

# stop_pid PID: SIGTERM, then SIGKILL after 10s; waits until it is gone.
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		pid_gone "$pid" && return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
}

# pid_gone PID: the process has exited (a zombie counts as gone: its GPU
# memory is back).
pid_gone() {
	local st
	kill -0 "$1" 2>/dev/null || return 0
	st=$(awk '{ sub(/^.*\) /, ""); print substr($0, 1, 1) }' "/proc/$1/stat" 2>/dev/null) || return 0
	[[ $st == Z || $st == X ]]
}

# tried_mib LOG: the MiB of the last "Tried to allocate N (KiB|MiB|GiB|TiB)"
# in LOG, rounded up as gpusched does (internal/gpu/oom.go).
tried_mib() {
	grep -oE 'Tried to allocate [0-9]+(\.[0-9]+)? ?(KiB|MiB|GiB|TiB)' "$1" | tail -n 1 |
		awk '{ v = $4; u = $5; if (u == "") { u = v; sub(/^[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v) }
			if (u == "KiB") v /= 1024; else if (u == "GiB") v *= 1024; else if (u == "TiB") v *= 1048576
			print int(v + 0.999999) }'
}

# ---------------------------------------------------------------- the checks

# Check 1: gpusched gpus --live --json against nvidia-smi's own CSV, idle
# and with a process holding memory; measures the CUDA context overhead.
check_gpus_live() {
	local d="$out/check1-gpus-live"
	mkdir -p "$d"
	begin_check
	local figs="" state rows cards_ok=0 ncards=0 pid_missing=""
	for state in idle load; do
		if [[ $state == load ]]; then
			if [[ -n $alloc_broken ]]; then
				fails+=("under load: not checked: $alloc_broken")
				break
			fi
			start_outside 1024 "$d/load-process.out" || break
			local lp=$outside_pid
			ctx_measured=$((outside_drop - 1024))
			((outside_drop >= 1024))
			want $? "under load: the card's free memory fell by $outside_drop MiB when a process took 1024 MiB"
			if [[ -z $outside_listed ]]; then
				pid_missing="compute-apps does not list the allocator's pid $lp (listed: $(smi_apps "$tmp/apps.csv" | cut -f1 | tr '\n' ' ')); another PID namespace? gpusched then cannot tell its tasks' memory from foreign memory"
			fi
		fi
		smi gpu >"$d/$state-before-gpu.csv" 2>&1
		smi apps >"$d/$state-before-apps.csv" 2>&1
		"$gpusched" gpus --live --json >"$d/$state-gpus-live.json" 2>"$d/$state-gpus-live.err"
		want $? "$state: gpusched gpus --live --json failed: $(head -c 300 "$d/$state-gpus-live.err")"
		smi gpu >"$d/$state-after-gpu.csv" 2>&1
		smi apps >"$d/$state-after-apps.csv" 2>&1
		cp "$d/$state-before-gpu.csv" "$out/nvidia-smi/$state-query-gpu-csv.txt"
		cp "$d/$state-before-apps.csv" "$out/nvidia-smi/$state-query-compute-apps-csv.txt"
		jflat "$d/$state-gpus-live.json" >"$d/$state-gpus-live.flat" 2>>"$d/$state-gpus-live.err"
		[[ $(jget "$d/$state-gpus-live.flat" source) == live ]]
		want $? "$state: gpus --live --json source is not \"live\""
		# Every card nvidia-smi lists, field by field; used and free may
		# move between the readings, so they must match the reading before
		# or the one after.
		rows=$(smi_cards "$d/$state-before-gpu.csv")
		ncards=0
		local idx uuid name total used free i g
		while IFS=$'\t' read -r idx uuid name total used free; do
			ncards=$((ncards + 1))
			local after
			after=$(smi_cards "$d/$state-after-gpu.csv" | awk -F'\t' -v u="$uuid" '$2 == u')
			if ! i=$(jidx "$d/$state-gpus-live.flat" cards uuid "$uuid"); then
				fails+=("$state: card $idx ($uuid) is missing from gpusched gpus --live --json")
				continue
			fi
			local bad=""
			g=$(jget "$d/$state-gpus-live.flat" "cards.$i.index")
			[[ $g == "$idx" ]] || bad+=" index $g/$idx"
			g=$(jget "$d/$state-gpus-live.flat" "cards.$i.name")
			[[ $g == "$name" ]] || bad+=" name \"$g\"/\"$name\""
			g=$(jget "$d/$state-gpus-live.flat" "cards.$i.total_mib")
			[[ $g == "$total" ]] || bad+=" total $g/$total"
			g=$(jget "$d/$state-gpus-live.flat" "cards.$i.used_mib")
			[[ $g == "$used" || $g == "$(cut -f5 <<<"$after")" ]] || bad+=" used $g/$used"
			g=$(jget "$d/$state-gpus-live.flat" "cards.$i.free_mib")
			[[ $g == "$free" || $g == "$(cut -f6 <<<"$after")" ]] || bad+=" free $g/$free"
			if [[ -n $bad ]]; then
				fails+=("$state: card $idx: gpusched/nvidia-smi differ:$bad")
			else
				cards_ok=$((cards_ok + 1))
			fi
			if [[ $uuid == "$card_uuid" ]]; then
				figs+="${figs:+; }$state: $name $uuid total $total MiB, used $used, free $free"
				if [[ $state == load ]]; then
					local fm fp
					fm=$(int "$(jget "$d/$state-gpus-live.flat" "cards.$i.foreign_mib")")
					fp=$(int "$(jget "$d/$state-gpus-live.flat" "cards.$i.foreign_procs")")
					((fm >= 1024 && fp >= 1))
					want $? "load: gpusched counts foreign ${fm} MiB in ${fp} processes, want the allocator's >= 1024 MiB in >= 1 (nothing of ours runs)"
					figs+=", foreign $fm MiB in $fp process(es)"
				fi
			fi
		done <<<"$rows"
		((ncards > 0))
		want $? "$state: no card rows in nvidia-smi's output ($d/$state-before-gpu.csv)"
		if [[ $state == load ]]; then
			stop_pid "$lp"
			wait "$lp" 2>/dev/null
		fi
	done
	if [[ -n $ctx_measured ]]; then
		figs+="; a process holding a 1024 MiB tensor took $outside_drop MiB of the card's free memory"
	fi
	verdict 1 "gpus --live" "$cards_ok card readings match nvidia-smi; $figs"
	[[ -n $ctx_measured ]] || return 0
	# gpusched tells its tasks' memory from foreign memory by the PIDs in
	# compute-apps: they must be the PIDs it starts.
	if [[ -n $outside_listed ]]; then
		result 1-pid PASS "compute-apps lists the allocating process by its own pid, with $outside_listed MiB"
	else
		result 1-pid FAIL "$pid_missing"
	fi
	if ((dry)); then
		result 1-ctx SKIP "CUDA context overhead: the fake driver has none (dry run)"
	elif ((ctx_measured > 0)); then
		result 1-ctx PASS "CUDA context overhead: $ctx_measured MiB per process beyond its tensor (card's free memory fell by $outside_drop MiB for a 1024 MiB tensor; compute-apps: ${outside_listed:-not listed})"
	else
		result 1-ctx FAIL "CUDA context overhead: the card's free memory fell by $outside_drop MiB for a 1024 MiB tensor; expected more"
	fi
}

# Check 2: more tasks than fit, each allocating what it declares.
check_packing() {
	local d="$out/check2-packing"
	mkdir -p "$d"
	begin_check
	wait_card_quiet
	local D=$((avail * 10 / 32))
	local k=$((avail / D)) n tensor=$((D - ctx_allow)) i
	n=$((k + 2))
	{
		scheduling_yaml
		echo "tasks:"
		for ((i = 1; i <= n; i++)); do
			echo "  - {id: pack-$i, args: $(alloc_yaml "$tensor" "$hold"), resources: {device: cuda, memory_mib: $D}}"
		done
	} >"$d/workflow.yaml"
	run_check_workflow "$d"
	local f="$d/status.flat" ids=() t
	for ((i = 1; i <= n; i++)); do ids+=("pack-$i"); done
	((run_rc == 0))
	want $? "gpusched run exited $run_rc, want 0 ($(states_of "$f" "${ids[@]}"))"
	want_complete "$f" "${ids[@]}"
	local oom
	oom=$(ooms_in "$d")
	[[ -z $oom ]]
	want $? "CUDA out of memory in $oom"
	local most
	most=$(max_running "$d/events.tsv" '^pack-')
	((most == k))
	want $? "at most $most ran at once, want $k (what fits: $avail MiB available / $D MiB)"
	# Peaks: gpusched saw each task's real use.
	local pmin="" pmax="" p
	for t in "${ids[@]}"; do
		p=$(int "$(task_get "$f" "$t" history.0.mem_peak_mib)")
		[[ -z $pmin ]] || ((p < pmin)) && pmin=$p
		[[ -z $pmax ]] || ((p > pmax)) && pmax=$p
		((p >= tensor))
		want $? "$t: peak seen $p MiB, want >= its $tensor MiB tensor"
	done
	# Status while they ran: the charges on the card, and the most at once.
	local s best=0 best_h=0 ch cap
	for s in "$d"/samples/status-*.flat; do
		[[ -e $s ]] || continue
		ch=$(card_get "$s" charged_mib) || continue
		ch=$(int "$ch")
		if ((ch > best)); then
			best=$ch
			best_h=$(awk -F'\t' '$1 ~ /^gpus\.[0-9]+\.tasks\.[0-9]+\.task$/' "$s" | grep -c $'\tpack-')
			cp "$s" "$d/status-most-charged.flat"
			local sn=${s##*status-}
			sn=${sn%.flat}
			cp "$d/samples/apps-$sn.csv" "$out/nvidia-smi/load${k}-query-compute-apps-csv.txt" 2>/dev/null
			cp "$d/samples/gpu-$sn.csv" "$out/nvidia-smi/load${k}-query-gpu-csv.txt" 2>/dev/null
		fi
	done
	cap=$((free + 0))
	((best >= k * D && best_h == k))
	want $? "status never showed $k tasks charged >= $((k * D)) MiB on the card (most: $best MiB, $best_h tasks)"
	((best <= cap))
	want $? "status showed $best MiB charged, more than the $cap MiB free before the run"
	# The report draws them: a bar per task on the card's lanes, as many
	# lanes as ran at once, and the card's memory chart.
	local r="$d/report.html" lanes missing=""
	if [[ -s $r ]]; then
		lanes=$(grep -o "data-lane=\"gpu-$card_index/[0-9]*\"" "$r" | sort -u | wc -l)
		((lanes == k))
		want $? "the report draws $lanes lanes on card $card_index, want $k"
		for t in "${ids[@]}"; do
			grep -q "<title>$t · attempt 1 · complete" "$r" || missing+=" $t"
		done
		[[ -z $missing ]]
		want $? "the report has no bar for:$missing"
		grep -q "<figure class=\"mem\" data-card=\"$card_index\"" "$r" && grep -q 'class="m-charged" d="M' "$r"
		want $? "the report has no memory chart with charges for card $card_index"
	else
		fails+=("no report written ($d/status.err)")
	fi
	verdict 2 packing "$n tasks of $D MiB (a $tensor MiB tensor + $ctx_allow context allowance) on $avail MiB available: at most $most at once ($k fit), most charged at once $best MiB by $best_h tasks, peaks seen ${pmin:-?}-${pmax:-?} MiB, OOM in: ${oom:-none}"
}

# Check 3: a task using five times what it declared.
check_reconcile() {
	local d="$out/check3-reconcile"
	mkdir -p "$d"
	begin_check
	wait_card_quiet
	local decl=$((card_total * 10 / 141)) alloc=$((card_total * 50 / 141))
	local gap=$(((alloc - decl) / 4))
	local other=$((avail - decl - gap))
	{
		scheduling_yaml
		echo "tasks:"
		echo "  - {id: liar, args: $(alloc_yaml "$alloc" "$liar_hold"), resources: {device: cuda, memory_mib: $decl}}"
		echo "  - {id: gate, args: $(yaml_list bash "$self" __wait-charged "$gpusched" "$d/run" liar "$alloc" "$startup_wait" "$poll_s")}"
		echo "  - {id: other, dependencies: [gate], args: $(alloc_yaml $((other - ctx_allow)) "$short_hold"), resources: {device: cuda, memory_mib: $other}}"
	} >"$d/workflow.yaml"
	run_check_workflow "$d"
	local f="$d/status.flat"
	((run_rc == 0))
	want $? "gpusched run exited $run_rc, want 0 ($(states_of "$f" liar gate other))"
	want_complete "$f" liar gate other
	local peak liar_pid
	peak=$(int "$(task_get "$f" liar history.0.mem_peak_mib)")
	liar_pid=$(int "$(task_get "$f" liar history.0.pid)")
	((peak >= alloc))
	want $? "liar: peak seen $peak MiB, want >= the $alloc MiB it allocated (it declared $decl)"
	# While the liar held its memory and other waited: the card's charge.
	local s charged=0 waiting="" lc
	for s in "$d"/samples/status-*.flat; do
		[[ -e $s ]] || continue
		[[ $(task_get "$s" liar state) == running && $(task_get "$s" other state) == pending &&
			$(task_get "$s" gate state) == complete ]] || continue
		lc=$(holder_get "$s" liar observed_mib) || continue
		lc=$(int "$lc")
		if ((lc > charged)); then
			charged=$lc
			waiting=$(task_get "$s" other waiting)
			cp "$s" "$d/status-other-waiting.flat"
		fi
	done
	((charged >= alloc))
	want $? "status never showed the liar charged >= $alloc MiB while other waited (most: $charged)"
	[[ -n $waiting ]]
	want $? "other waited without a reason in status"
	local ended started
	ended=$(ev_seq "$d/events.tsv" attempt-ended liar 1)
	started=$(ev_seq "$d/events.tsv" started other 1)
	[[ -n $ended && -n $started ]] && ((started > ended))
	want $? "other started (event ${started:-none}) before the liar ended (event ${ended:-none}): its $other MiB did not fit beside the liar's real use"
	local oom
	oom=$(ooms_in "$d")
	[[ -z $oom ]]
	want $? "CUDA out of memory in $oom"
	verdict 3 reconciliation "liar declared $decl MiB, allocated $alloc, charged $charged (peak $peak); other ($other MiB) waited: \"${waiting:0:160}\"; OOM in: ${oom:-none}"
	# The charge is what compute-apps says the liar's process uses: its
	# tensor plus the CUDA context.
	if ((dry)); then
		result 3-ctx SKIP "charge includes the CUDA context: the fake driver has none (dry run)"
		return
	fi
	local raw=0 c u
	for c in "$d"/samples/apps-*.csv; do
		[[ -e $c ]] || continue
		u=$(int "$(smi_apps "$c" | awk -F'\t' -v p="$liar_pid" '$1 == p { print $3; exit }')")
		((u > raw)) && raw=$u
	done
	if ((raw > alloc && peak == raw)); then
		result 3-ctx PASS "liar (pid $liar_pid): compute-apps $raw MiB = tensor $alloc + context $((raw - alloc)); gpusched's peak $peak"
	else
		result 3-ctx FAIL "liar (pid $liar_pid): compute-apps showed at most $raw MiB for its $alloc MiB tensor, gpusched's peak $peak (want peak = compute-apps > tensor)"
	fi
}

# Check 4: memory held by a process gpusched did not start.
check_foreign() {
	local d="$out/check4-foreign"
	mkdir -p "$d"
	begin_check
	wait_card_quiet
	local empty_avail=$avail F=$((card_total * 60 / 141))
	if ! start_outside "$F" "$d/foreign-process.out"; then
		verdict 4 foreign "nothing run"
		return
	fi
	foreign_pid=$outside_pid
	echo "$foreign_pid" >"$d/foreign.pid"
	local seen=$outside_drop
	((seen >= F))
	want $? "the card's free memory fell by $seen MiB when the foreign process took $F MiB"
	"$gpusched" gpus --live --json >"$d/gpus-live.json" 2>"$d/gpus-live.err"
	jflat "$d/gpus-live.json" >"$d/gpus-live.flat" 2>>"$d/gpus-live.err"
	local fm fp
	fm=$(int "$(card_get "$d/gpus-live.flat" foreign_mib)")
	fp=$(int "$(card_get "$d/gpus-live.flat" foreign_procs)")
	((fm >= seen && fp >= 1))
	want $? "gpus --live counts $fm MiB foreign in $fp processes, want >= the $seen MiB the process took (pid $foreign_pid)"
	local now_free now_avail
	now_free=$(card_free)
	now_avail=$((now_free - margin))
	local fits=$((now_avail * 7 / 10)) big=$((empty_avail - F / 2))
	{
		scheduling_yaml "gpu_reserve_after: never"
		echo "tasks:"
		echo "  - {id: big, priority: 10, args: $(alloc_yaml $((big - ctx_allow)) "$short_hold"), resources: {device: cuda, memory_mib: $big}}"
		echo "  - {id: fits, args: $(alloc_yaml $((fits - ctx_allow)) "$hold"), resources: {device: cuda, memory_mib: $fits}}"
		echo "  - {id: release, dependencies: [fits], args: $(yaml_list bash "$self" __release "$foreign_pid")}"
	} >"$d/workflow.yaml"
	run_check_workflow "$d"
	stop_pid "$foreign_pid"
	wait "$foreign_pid" 2>/dev/null
	foreign_pid=""
	local f="$d/status.flat"
	((run_rc == 0))
	want $? "gpusched run exited $run_rc, want 0 ($(states_of "$f" big fits release))"
	want_complete "$f" big fits release
	# fits ran beside the foreign memory (release waits for it), holding
	# what it allocated, and status showed both on the card at once.
	local s beside=0 fpk
	fpk=$(int "$(task_get "$f" fits history.0.mem_peak_mib)")
	((fpk >= fits - ctx_allow))
	want $? "fits: peak seen $fpk MiB, want >= its $((fits - ctx_allow)) MiB tensor"
	for s in "$d"/samples/status-*.flat; do
		[[ -e $s && $(task_get "$s" fits state) == running ]] || continue
		(($(int "$(card_get "$s" foreign_mib)") >= seen)) && beside=1 && break
	done
	((beside))
	want $? "status never showed fits running beside >= $seen MiB of foreign memory"
	local s_rel s_big
	s_rel=$(ev_seq "$d/events.tsv" complete release)
	s_big=$(ev_seq "$d/events.tsv" started big 1)
	[[ -n $s_big && -n $s_rel ]] && ((s_big > s_rel))
	want $? "big ($big MiB, room for it only without the foreign process) started (event ${s_big:-none}) before the foreign process was gone (event ${s_rel:-none})"
	# While big waited, status said why: the foreign memory, as much as the
	# process took.
	local why="" w fw=0
	for s in "$d"/samples/status-*.flat; do
		[[ -e $s ]] || continue
		[[ $(task_get "$s" big state) == pending ]] || continue
		w=$(task_get "$s" big waiting) || continue
		why=$w
		fw=$(int "$(grep -oE 'foreign [0-9]+' <<<"$w" | head -n 1 | cut -d' ' -f2)")
		((fw >= seen)) && break
	done
	((fw >= seen))
	want $? "status never said big waits beside >= $seen MiB of foreign memory (last reason: \"${why:0:160}\")"
	local oom
	oom=$(ooms_in "$d")
	[[ -z $oom ]]
	want $? "CUDA out of memory in $oom"
	verdict 4 foreign "a process outside gpusched took $seen MiB (compute-apps: ${outside_listed:-not listed}; gpusched counted $fm MiB foreign); fits ($fits MiB) ran beside it, big ($big MiB) waited until it was gone: \"${why:0:160}\"; OOM in: ${oom:-none}"
}

# Check 5: PyTorch's out-of-memory error, and the retry with more memory.
check_oom() {
	local d="$out/check5-oom"
	mkdir -p "$d"
	begin_check
	wait_card_quiet
	local huge=$((card_total * 6 / 5))
	local filler=$((avail * 55 / 100)) g0=$((1024 + ctx_allow)) g1=$((avail * 60 / 100))
	{
		scheduling_yaml
		echo "tasks:"
		echo "  - {id: too-big, retries: 1, args: $(alloc_yaml "$huge" "$short_hold"), resources: {device: cuda, memory_mib: 1024}}"
		echo "  - {id: filler, args: $(alloc_yaml $((filler - ctx_allow)) "$filler_hold"), resources: {device: cuda, memory_mib: $filler}}"
		echo "  - {id: grower, retries: 1, args: $(alloc_yaml 1024 "$grow_hold" "$g1" "$grow_after"), resources: {device: cuda, memory_mib: $g0}}"
	} >"$d/workflow.yaml"
	run_check_workflow "$d"
	local f="$d/status.flat"
	((run_rc == 1))
	want $? "gpusched run exited $run_rc, want 1 (too-big fails on purpose) ($(states_of "$f" too-big filler grower))"
	# too-big: more than the card has; the grown budget cannot fit: no retry.
	local st at err log1
	st=$(task_get "$f" too-big state)
	at=$(task_get "$f" too-big attempts)
	err=$(task_get "$f" too-big error)
	log1=$(task_get "$f" too-big history.0.log_path)
	[[ $st == failed && $at == 1 ]]
	want $? "too-big is $st after $at attempts, want failed after 1 (its retry cannot fit any card)"
	[[ $err == *"CUDA out of memory"* && $err == *"no retry"* ]]
	want $? "too-big's error does not say CUDA out of memory, no retry: \"${err:0:200}\""
	local msg
	msg=$(grep -m 1 -oE '[A-Za-z.]*(Error|Exception)?:? ?CUDA out of memory\. Tried to allocate [^(]*' "$log1" 2>/dev/null)
	[[ -n $msg ]]
	want $? "too-big's log has no \"CUDA out of memory. Tried to allocate\" ($log1)"
	# grower: out of memory beside filler, retried with the documented
	# budget once filler is gone.
	want_complete "$f" filler grower
	local ga e1 peak1 tried req2 expect glog
	ga=$(task_get "$f" grower attempts)
	[[ $ga == 2 ]]
	want $? "grower ran $ga attempts, want 2 (out of memory, then the retry)"
	e1=$(task_get "$f" grower history.0.exit_code)
	glog=$(task_get "$f" grower history.0.log_path)
	[[ -n $e1 && $e1 != 0 && $e1 != null ]] && grep -qE "$oom_re" "$glog" 2>/dev/null
	want $? "grower's first attempt (exit ${e1:-?}) did not end in CUDA out of memory ($glog)"
	peak1=$(int "$(task_get "$f" grower history.0.mem_peak_mib)")
	tried=$(tried_mib "$glog" 2>/dev/null)
	req2=$(int "$(task_get "$f" grower history.1.mem_requested_mib)")
	expect=$(((g0 > peak1 ? g0 : peak1) + $(int "$tried") + margin))
	[[ -n $tried ]] && ((req2 == expect))
	want $? "grower's retry asked $req2 MiB, want max(request $g0, peak $peak1) + tried ${tried:-?} + margin $margin = $expect (docs/gpu.md)"
	local s_fend s_g2
	s_fend=$(ev_seq "$d/events.tsv" attempt-ended filler 1)
	s_g2=$(ev_seq "$d/events.tsv" started grower 2)
	[[ -n $s_fend && -n $s_g2 ]] && ((s_g2 > s_fend))
	want $? "grower's retry ($req2 MiB) started before filler ($filler MiB) left the card"
	verdict 5 "out of memory" "too-big (${huge} MiB on a $card_total MiB card): ${st:-?} after ${at:-?} attempt(s), \"${msg:0:120}\"; grower: OOM growing to $g1 MiB beside filler ($filler), retried with $req2 MiB = max($g0, $peak1) + $tried + $margin, ${ga:-?} attempts"
	if ((dry)); then
		result 5-torch SKIP "PyTorch's own exception (torch.OutOfMemoryError): the fake job prints its message, not torch's (dry run)"
	elif grep -qE 'torch(\.cuda)?\.OutOfMemoryError: CUDA out of memory\. Tried to allocate' "$log1" "$glog" 2>/dev/null; then
		result 5-torch PASS "the logs carry PyTorch's own \"$(grep -h -m 1 -oE 'torch(\.cuda)?\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [0-9.]+ [KMGT]iB' "$log1" | head -n 1)\""
	else
		result 5-torch FAIL "no torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ... in $log1 or $glog"
	fi
}

# Check 6: what the task's CUDA sees.
check_cuda_env() {
	local d="$out/check6-cuda-env"
	mkdir -p "$d"
	begin_check
	wait_card_quiet
	{
		scheduling_yaml
		echo "tasks:"
		echo "  - {id: env-gpu, args: $(envdump_yaml 256 0), resources: {device: cuda, memory_mib: $((256 + ctx_allow))}}"
		echo "  - {id: env-cpu, args: $(envdump_yaml 256 0)}"
	} >"$d/workflow.yaml"
	run_check_workflow "$d"
	local f="$d/status.flat"
	((run_rc == 0))
	want $? "gpusched run exited $run_rc, want 0 ($(states_of "$f" env-gpu env-cpu))"
	want_complete "$f" env-gpu env-cpu
	local gl cl gi gu
	gl=$(task_get "$f" env-gpu history.0.log_path)
	cl=$(task_get "$f" env-cpu history.0.log_path)
	gi=$(task_get "$f" env-gpu history.0.gpu)
	gu=$(task_get "$f" env-gpu history.0.gpu_uuid)
	[[ $gi == "$card_index" && $gu == "$card_uuid" ]]
	want $? "env-gpu ran on card $gi ($gu), want $card_index ($card_uuid)"
	envv() { sed -n "s/^env $2=//p" "$1" 2>/dev/null | head -n 1; }
	local cvd cdo gpu_uuid seen
	cvd=$(envv "$gl" CUDA_VISIBLE_DEVICES)
	cdo=$(envv "$gl" CUDA_DEVICE_ORDER)
	gpu_uuid=$(envv "$gl" GPUSCHED_GPU_UUID)
	[[ $cvd == "$gi" && $cdo == PCI_BUS_ID ]]
	want $? "env-gpu saw CUDA_VISIBLE_DEVICES=$cvd CUDA_DEVICE_ORDER=$cdo, want $gi and PCI_BUS_ID"
	[[ $gpu_uuid == "$card_uuid" && $(envv "$gl" GPUSCHED_GPU_INDEX) == "$card_index" ]]
	want $? "env-gpu saw GPUSCHED_GPU_UUID=$gpu_uuid GPUSCHED_GPU_INDEX=$(envv "$gl" GPUSCHED_GPU_INDEX), want $card_uuid $card_index"
	seen=$(grep -m 1 -oE ' pid=[0-9]+ gpu=[^ ]+' "$gl" 2>/dev/null | sed 's/.*gpu=//')
	local torch_count torch_dev
	if ((dry)); then
		[[ $seen == "$card_uuid" ]]
		want $? "the job's CUDA opened ${seen:-no device}, want $card_uuid"
	else
		torch_count=$(sed -n 's/^torch device_count=//p' "$gl" | head -n 1)
		torch_dev=$(sed -n 's/^torch device0 //p' "$gl" | head -n 1)
		[[ $torch_count == 1 ]]
		want $? "torch.cuda.device_count() is ${torch_count:-?} in the task, want 1"
		if [[ $seen != unknown ]]; then
			[[ $seen == "$card_uuid" ]]
			want $? "torch.cuda device 0 is ${seen:-none}, want $card_uuid"
		else
			[[ $torch_dev == "name=${card_name// /_} "* ]]
			want $? "torch.cuda device 0 is \"$torch_dev\", want $card_name (this PyTorch gives no UUID)"
		fi
	fi
	# The CPU task: CUDA_VISIBLE_DEVICES set and empty, no device.
	local ccvd cexit
	ccvd=$(envv "$cl" CUDA_VISIBLE_DEVICES)
	cexit=$(sed -n 's/^alloc exit=//p' "$cl" | head -n 1)
	[[ $ccvd == "" ]] && grep -q '^env CUDA_VISIBLE_DEVICES=$' "$cl" 2>/dev/null
	want $? "env-cpu saw CUDA_VISIBLE_DEVICES=\"$ccvd\", want it set and empty"
	[[ -n $cexit && $cexit != 0 ]] && ! grep -qE ' pid=[0-9]+ gpu=GPU-' "$cl"
	want $? "env-cpu's allocation (exit ${cexit:-?}) got a GPU; a CPU task must see none"
	if ((!dry)); then
		[[ $(sed -n 's/^torch device_count=//p' "$cl" | head -n 1) == 0 ]]
		want $? "torch.cuda.device_count() is not 0 in a CPU task"
	fi
	local figs="env-gpu on card $gi: CUDA_VISIBLE_DEVICES=$cvd CUDA_DEVICE_ORDER=$cdo GPUSCHED_GPU_UUID=$gpu_uuid; device opened: ${seen:-none}"
	((dry)) || figs+=" (torch: $torch_count device(s), $torch_dev)"
	figs+="; env-cpu: CUDA_VISIBLE_DEVICES=\"\", allocation exit $cexit"
	verdict 6 "CUDA env" "$figs"
	if ((dry)); then
		result 6-torch SKIP "torch.cuda's own view of the device (count, UUID): no PyTorch in a dry run; the fake CUDA resolved the variables instead"
	elif [[ $seen == unknown ]]; then
		result 6-torch SKIP "this PyTorch does not expose the device UUID (torch.cuda.get_device_properties(0).uuid); the name was compared instead"
	fi
}

# ---------------------------------------------------------------- internal commands (run as tasks)

# __wait-charged GPUSCHED RUN_DIR TASK MIB TIMEOUT POLL: exits 0 once the
# run's status shows TASK holding at least MIB MiB on a card, 1 on timeout.
wait_charged() {
	local bin=$1 rd=$2 task=$3 mib=$4 deadline=$((SECONDS + $5)) poll=$6 tmpf
	tmpf=$(mktemp)
	while ((SECONDS < deadline)); do
		if "$bin" status --run-dir "$rd" --json 2>/dev/null | jflat >"$tmpf" 2>/dev/null &&
			awk -F'\t' -v t="$task" -v m="$mib" '
				$1 ~ /^gpus\.[0-9]+\.tasks\.[0-9]+\.task$/ { cur = $2 }
				$1 ~ /^gpus\.[0-9]+\.tasks\.[0-9]+\.observed_mib$/ && cur == t && $2 + 0 >= m + 0 { ok = 1 }
				END { exit !ok }' "$tmpf"; then
			echo "$task holds >= $mib MiB in gpusched's view: $(grep -E 'observed_mib|charged_mib' "$tmpf" | tr '\n' ' ')"
			rm -f "$tmpf"
			return 0
		fi
		sleep "$poll"
	done
	echo "gave up after $5s: $task never seen holding $mib MiB" >&2
	rm -f "$tmpf"
	return 1
}

# __release PID: stops the foreign process and waits until it is gone.
release() {
	echo "stopping the foreign process $1"
	stop_pid "$1"
	for ((i = 0; i < 100; i++)); do
		pid_gone "$1" && { echo "gone"; return 0; }
		sleep 0.1
	done
	echo "process $1 is still there" >&2
	return 1
}

# ---------------------------------------------------------------- main

foreign_pid=""
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	[[ -n $sampler_pid ]] && kill "$sampler_pid" 2>/dev/null
	[[ -n $foreign_pid ]] && kill -KILL "$foreign_pid" 2>/dev/null
	[[ -n ${tmp:-} ]] && rm -rf "$tmp"
}

main() {
	dry=0 only="1,2,3,4,5,6" gpusched="" fake_smi="" fake_job="" budget=280 out=""
	while (($#)); do
		case $1 in
		--dry-run) dry=1 ;;
		--only) only=${2:?--only needs a list such as 1,3}; shift ;;
		--only=*) only=${1#*=} ;;
		--gpusched) gpusched=${2:?--gpusched needs a path}; shift ;;
		--fake-smi) fake_smi=${2:?--fake-smi needs a path}; shift ;;
		--fake-job) fake_job=${2:?--fake-job needs a path}; shift ;;
		--budget) budget=${2:?--budget needs seconds}; shift ;;
		-h | --help) usage 0 ;;
		-*) die "unknown option $1 (see --help)" ;;
		*) [[ -z $out ]] || die "one output folder, please (got $out and $1)"; out=$1 ;;
		esac
		shift
	done
	[[ -n $out ]] || usage
	[[ $only =~ ^[1-6](,[1-6])*$ ]] || die "--only takes check numbers 1-6 separated by commas, not \"$only\""
	[[ $budget =~ ^[0-9]+$ ]] || die "--budget takes whole seconds, not \"$budget\""
	mkdir -p "$out" || die "cannot make $out"
	out=$(cd "$out" && pwd)
	: >"$out/check.log"
	: >"$out/summary.txt"
	tmp=$(mktemp -d)
	trap cleanup EXIT
	trap 'exit 130' INT TERM

	# Timings: a dry run's fakes start at once; real jobs import torch and
	# make a CUDA context first (seconds).
	if ((dry)); then
		poll=300ms poll_s=0.3 sample_every=0.3 hold=2.5 short_hold=0.5 liar_hold=4
		filler_hold=3 grow_after=1 grow_hold=1.5 task_timeout=60 run_timeout=60 startup_wait=6
	else
		poll=1s poll_s=1 sample_every=1 hold=6 short_hold=2 liar_hold=10
		filler_hold=10 grow_after=3 grow_hold=4 task_timeout=90 run_timeout=100 startup_wait=90
	fi

	if ((dry)); then
		setup_fakes
	fi
	smi_bin=${GPUSCHED_NVIDIA_SMI:-nvidia-smi}
	say "real-gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n): $( ((dry)) && echo "DRY RUN against the project's fakes" || echo "real GPU")"
	if ! command -v "$smi_bin" >/dev/null 2>&1; then
		no_gpu "nvidia-smi not found (\$GPUSCHED_NVIDIA_SMI=${GPUSCHED_NVIDIA_SMI:-unset}, PATH=$PATH)"
	fi
	mkdir -p "$out/nvidia-smi" "$out/env"
	local rc
	smi gpu >"$tmp/first.csv" 2>&1
	rc=$?
	if [[ -z $(smi_cards "$tmp/first.csv") ]]; then
		no_gpu "nvidia-smi $gpu_query --format=csv failed (exit $rc): $(head -n 1 "$tmp/first.csv")"
	fi
	# A lost card gives an error line, rows for the others and a non-zero
	# exit: the others can still be checked.
	((rc == 0)) || say "nvidia-smi exited $rc but listed cards: $(grep -v '^[0-9]' "$tmp/first.csv" | sed -n 2p)"

	# The card: the one with the most free memory.
	local line
	line=$(smi_cards "$tmp/first.csv" | sort -t$'\t' -k6,6nr | head -n 1)
	IFS=$'\t' read -r card_index card_uuid card_name card_total _ _ <<<"$line"
	card_total=$(int "$card_total")
	say "card: $card_index $card_name $card_uuid, $card_total MiB (of $(smi_cards "$tmp/first.csv" | wc -l) card(s))"
	((card_total >= 16384)) || {
		result setup FAIL "card $card_index has $card_total MiB; the checks need at least 16384"
		finish
	}

	if [[ -z $gpusched ]]; then
		if [[ -x $root/gpusched ]]; then gpusched=$root/gpusched; else gpusched=$(command -v gpusched) || true; fi
	fi
	[[ -n $gpusched && -x $gpusched ]] || die "no gpusched binary: build one with CGO_ENABLED=0 go build -o gpusched ./cmd/gpusched, or give --gpusched"
	gpusched=$(cd "$(dirname "$gpusched")" && pwd)/$(basename "$gpusched")
	capture_env

	# The allocator must work before the checks that use it.
	alloc_broken=""
	if ((dry)); then
		[[ -x $fake_job ]] || alloc_broken="no fake GPU job at \"$fake_job\""
	elif ! timeout -k 5 120 python3 "$here/gpu-alloc.py" --probe >"$out/env/torch-probe.txt" 2>&1; then
		alloc_broken="python3 with PyTorch and CUDA is not usable: $(tail -n 1 "$out/env/torch-probe.txt")"
	fi
	[[ -z $alloc_broken ]] || say "allocator: $alloc_broken"

	ctx_measured="" ctx_allow=""
	local c est name
	for c in 1 2 3 4 5 6; do
		[[ ,$only, == *,$c,* ]] || continue
		case $c in
		1) est=15 name="gpus --live" ;;
		2) est=35 name=packing ;;
		3) est=35 name=reconciliation ;;
		4) est=40 name=foreign ;;
		5) est=40 name="out of memory" ;;
		6) est=15 name="CUDA env" ;;
		esac
		((dry)) && est=$((est / 3))
		if ((SECONDS + est > budget)); then
			result "$c" FAIL "$name: not run: ${SECONDS}s gone of the ${budget}s budget, it needs about ${est}s"
			continue
		fi
		if [[ $c != 1 && -n $alloc_broken ]]; then
			result "$c" FAIL "$name: not run: $alloc_broken"
			continue
		fi
		if ((c > 1)) && [[ -z $ctx_allow ]]; then
			# What the other checks allow per process beyond its tensor: the
			# context check 1 measured, and some slack.
			if [[ -n $ctx_measured ]]; then ctx_allow=$((ctx_measured + 256)); elif ((dry)); then ctx_allow=256; else ctx_allow=1024; fi
			((ctx_allow < 256)) && ctx_allow=256
			((ctx_allow > 4096)) && ctx_allow=4096
		fi
		local t0=$SECONDS
		case $c in
		1) check_gpus_live ;;
		2) check_packing ;;
		3) check_reconcile ;;
		4) check_foreign ;;
		5) check_oom ;;
		6) check_cuda_env ;;
		esac
		say "     ($((SECONDS - t0))s)"
	done
	finish
}

# setup_fakes: the fake nvidia-smi and GPU job and their state, for --dry-run.
setup_fakes() {
	if [[ -z $fake_smi && -z ${GPUSCHED_NVIDIA_SMI:-} ]] || [[ -z $fake_job ]]; then
		command -v go >/dev/null || die "--dry-run needs --fake-smi and --fake-job, or go to build them"
		mkdir -p "$out/bin"
		(cd "$root" && go build -o "$out/bin/fake-nvidia-smi" ./cmd/fake-nvidia-smi &&
			go build -o "$out/bin/fake-gpu-job" ./cmd/fake-gpu-job) || die "building the fakes failed"
		fake_smi=${fake_smi:-$out/bin/fake-nvidia-smi}
		fake_job=${fake_job:-$out/bin/fake-gpu-job}
	fi
	export GPUSCHED_NVIDIA_SMI=${GPUSCHED_NVIDIA_SMI:-$fake_smi}
	if [[ -z ${FAKE_GPU_STATE:-} ]]; then
		export FAKE_GPU_STATE="$out/fake-gpu-state.json"
		# Two H200s as the real one reports itself (143771 MiB, 614 MiB
		# reserved by the driver); card 0 is partly used by someone else,
		# so the check picks card 1 and CUDA_VISIBLE_DEVICES must say 1.
		cat >"$FAKE_GPU_STATE" <<'EOF'
{
  "cards": [
    {"index": 0, "uuid": "GPU-f00dcafe-0000-4000-8000-000000000000", "name": "NVIDIA H200", "bus_id": "00000000:18:00.0", "total_mib": 143771, "reserved_mib": 614, "foreign_mib": 30000},
    {"index": 1, "uuid": "GPU-f00dcafe-0000-4000-8000-000000000001", "name": "NVIDIA H200", "bus_id": "00000000:2A:00.0", "total_mib": 143771, "reserved_mib": 614}
  ]
}
EOF
	fi
	fake_job=$(cd "$(dirname "$fake_job")" && pwd)/$(basename "$fake_job")
}

# capture_env: versions and nvidia-smi's own views, for the record.
capture_env() {
	"$gpusched" --version >"$out/env/gpusched-version.txt" 2>&1
	{ uname -a; echo "cpus: $(nproc 2>/dev/null)"; } >"$out/env/machine.txt"
	timeout -k 2 30 "$smi_bin" >"$out/env/nvidia-smi.txt" 2>&1
	timeout -k 2 30 "$smi_bin" -L >"$out/env/nvidia-smi-L.txt" 2>&1
	timeout -k 2 30 "$smi_bin" --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,memory.reserved,memory.used,memory.free,persistence_mode,mig.mode.current,compute_mode --format=csv \
		>"$out/env/nvidia-smi-query-gpu-details.csv" 2>&1
	cat >"$out/nvidia-smi/README.txt" <<EOF
Raw output of the two queries gpusched makes (internal/gpu/nvidiasmi/probe.go):
  nvidia-smi $gpu_query --format=csv
  nvidia-smi $apps_query --format=csv
captured by scripts/real-gpu-check.sh on $(date -u +%Y-%m-%d) ($( ((dry)) && echo "DRY RUN: the project's fake nvidia-smi, not a real driver" || echo "real driver")).
idle-*: no process on the card; load-*: one allocating process (1024 MiB tensor) not started
by gpusched; loadN-*: N packing tasks of check 2 at once. Machine: see ../env/.
EOF
}

no_gpu() {
	say "no NVIDIA GPU here: $1."
	say "Nothing was checked (exit 0)."
	printf 'no GPU: %s; nothing checked\n' "$1" >>"$out/summary.txt"
	exit 0
}

finish() {
	local mode="real GPU"
	((dry)) && mode="DRY RUN against the fakes: says nothing about a real GPU"
	say ""
	say "summary: $n_pass PASS, $n_fail FAIL, $n_skip SKIP in ${SECONDS}s ($mode; card $card_index $card_name $card_uuid $card_total MiB)"
	say "captures: $out"
	printf 'summary: %d PASS, %d FAIL, %d SKIP in %ds (%s)\n' "$n_pass" "$n_fail" "$n_skip" "$SECONDS" "$mode" >>"$out/summary.txt"
	((n_fail == 0)) || exit 1
	exit 0
}

case ${1:-} in
__wait-charged)
	shift
	wait_charged "$@"
	exit
	;;
__release)
	shift
	release "$@"
	exit
	;;
esac
main "$@"
