#!/usr/bin/env python3
"""What supervision costs, in wall time and in CPU, on no-op tasks.

    bench/supervision.py [N_TASKS] [ROUNDS]      (defaults: 2000 and 5)

Builds this checkout and runs N_TASKS independent `true` tasks through
`gpusched run -j 2`, ROUNDS times each way, the ways taking turns so that a
change in the machine's load falls on all of them:

    supervised      as `gpusched run` is used (attempts outlive the scheduler)
    unsupervised    with GPUSCHED_NO_SUPERVISOR=1 (attempts die with it)
    baseline        $BASELINE, another gpusched binary, supervised (if set)

CPU is user + system time of every process of the run: the front, the
supervisor, the scheduler and the tasks. The supervisor outlives the
command (it exits a second after it has nothing to do), so this script
makes itself a child subreaper (PR_SET_CHILD_SUBREAPER) and waits for it
before reading the CPU its descendants used. On a machine shared with other
work CPU varies far less than wall time. Prints each round, then the
medians.
"""
import ctypes
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PR_SET_CHILD_SUBREAPER = 36


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("cannot become a child subreaper: %s" % os.strerror(ctypes.get_errno()))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp()
    try:
        binary = os.path.join(work, "gpusched")
        subprocess.run(["go", "build", "-o", binary, "./cmd/gpusched"], cwd=root, check=True)
        flat = os.path.join(work, "flat.yaml")
        with open(flat, "w") as f:
            f.write("tasks:\n")
            for i in range(1, n + 1):
                f.write("  - {id: t%d, args: [/bin/true]}\n" % i)
        ways = [("supervised", binary, {}), ("unsupervised", binary, {"GPUSCHED_NO_SUPERVISOR": "1"})]
        if os.environ.get("BASELINE"):
            ways.append(("baseline", os.environ["BASELINE"], {}))
        got = {name: [] for name, _, _ in ways}
        print("%d no-op tasks at -j 2, wall / CPU in seconds, %d rounds" % (n, rounds))
        print("  ".join("%-16s" % name for name, _, _ in ways))
        for _ in range(rounds):
            row = []
            for name, b, env in ways:
                wall, cpu = one_run(b, env, flat, os.path.join(work, "run"))
                got[name].append((wall, cpu))
                row.append("%6.3f / %6.3f  " % (wall, cpu))
            print("".join(row), flush=True)
        print("medians:")
        for name, _, _ in ways:
            walls, cpus = zip(*got[name])
            print("  %-13s wall %6.3f s   CPU %6.3f s" % (name, statistics.median(walls), statistics.median(cpus)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def one_run(binary, env, flat, run_dir):
    """Runs the workflow once; returns its wall time and the CPU of all its processes."""
    shutil.rmtree(run_dir, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([binary, "run", flat, "--run-dir", run_dir, "-j", "2"],
                   env={**os.environ, **env}, stdout=subprocess.DEVNULL, check=False)
    wall = time.monotonic() - start
    while True:  # the supervisor, reparented here, and whatever else is left
        try:
            os.wait()
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


if __name__ == "__main__":
    main()
