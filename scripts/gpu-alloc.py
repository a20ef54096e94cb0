#!/usr/bin/env python3
"""Takes real GPU memory with PyTorch, for scripts/real-gpu-check.sh.

    gpu-alloc.py [--mib N] [--hold SECONDS] [--grow-to MIB --grow-after SECONDS]
                 [--report-device] [--probe]

It is the real-GPU twin of the project's fake GPU job (cmd/fake-gpu-job),
with the same behaviour and the same first line, so that the check script
treats both alike:

- --mib N allocates N MiB on the first visible CUDA device as one tensor,
  written once so that the memory is really committed, then prints
  "gpu-alloc pid=P gpu=GPU-UUID mem=N" on stdout. With --mib 0 (and no
  --grow-to) CUDA is not touched at all.
- --grow-to M allocates M - N MiB more, --grow-after seconds after the
  first allocation. When the card has no room, PyTorch's own
  torch.OutOfMemoryError ("CUDA out of memory. Tried to allocate ...")
  ends the process with its traceback on stderr and exit status 1, as a
  real training job would.
- --hold S keeps the memory until S seconds after the first allocation (or
  until the growth, if that comes later), then exits 0. SIGTERM ends it at
  once; the driver takes the memory back.
- --report-device prints first what the process sees: CUDA_VISIBLE_DEVICES,
  CUDA_DEVICE_ORDER, the GPUSCHED_GPU_* variables, torch.cuda's device
  count and, for device 0, its name, UUID, total memory and PCI bus id.
- --probe prints the versions of Python, PyTorch and CUDA and the devices,
  and exits 0 when at least one CUDA device is usable, 1 otherwise.

Without PyTorch it says so on stderr and exits 3.
"""

import argparse
import os
import sys
import time

MIB = 1 << 20
EXIT_NO_TORCH = 3


def parse_args(argv):
    p = argparse.ArgumentParser(prog="gpu-alloc.py", description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=0, help="MiB to allocate at start")
    p.add_argument("--hold", type=float, default=0.0, help="seconds to hold it, from the first allocation")
    p.add_argument("--grow-to", type=int, default=0, help="MiB to hold after --grow-after (0: no growth)")
    p.add_argument("--grow-after", type=float, default=0.0, help="seconds after the first allocation")
    p.add_argument("--report-device", action="store_true", help="print what CUDA and torch see first")
    p.add_argument("--probe", action="store_true", help="print versions and devices, then exit")
    a = p.parse_args(argv)
    if a.mib < 0 or a.hold < 0 or a.grow_after < 0:
        p.error("amounts and durations must not be negative")
    if a.grow_to and a.grow_to < a.mib:
        p.error("--grow-to must not be below --mib")
    return a


def import_torch():
    try:
        import torch  # noqa: PLC0415 (imported late so that --help works without it)
    except Exception as e:  # ImportError, or a broken install raising something else
        print("gpu-alloc.py: PyTorch cannot be imported here (%s: %s); the real GPU check needs "
              "python3 with PyTorch built for CUDA" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(EXIT_NO_TORCH)
    return torch


def device_uuid(props):
    """Returns the device's UUID as nvidia-smi writes it (GPU-...), or "" when
    this PyTorch does not give it."""
    u = getattr(props, "uuid", None)
    if u is None:
        return ""
    s = str(u).strip().lower()
    if s.startswith("gpu-"):
        s = s[4:]
    return "GPU-" + s


def describe(torch, i):
    props = torch.cuda.get_device_properties(i)
    bus = ""
    if hasattr(props, "pci_bus_id"):
        bus = "%08X:%02X:%02X.0" % (getattr(props, "pci_domain_id", 0), props.pci_bus_id,
                                    getattr(props, "pci_device_id", 0))
    return "name=%s uuid=%s total_mib=%d pci_bus_id=%s" % (
        props.name.replace(" ", "_"), device_uuid(props) or "unknown", props.total_memory // MIB, bus or "unknown")


def report_device(torch):
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUSCHED_GPU_INDEX", "GPUSCHED_GPU_UUID",
              "GPUSCHED_GPU_MEMORY_MIB"):
        v = os.environ.get(k)
        print("env %s=%s" % (k, "<unset>" if v is None else v))
    n = torch.cuda.device_count()
    print("torch device_count=%d" % n)
    if n > 0:
        print("torch device0 " + describe(torch, 0))
    sys.stdout.flush()


def take(torch, mib):
    """Allocates mib MiB on device 0 and writes it, so that it is committed."""
    t = torch.empty(mib * MIB, dtype=torch.uint8, device="cuda")
    t.fill_(1)
    torch.cuda.synchronize()
    return t


def main(argv):
    a = parse_args(argv)
    torch = import_torch()
    if a.probe:
        print("python=%s torch=%s cuda=%s devices=%d" % (sys.version.split()[0], torch.__version__,
                                                         torch.version.cuda, torch.cuda.device_count()))
        for i in range(torch.cuda.device_count()):
            print("device%d %s" % (i, describe(torch, i)))
        return 0 if torch.cuda.is_available() and torch.cuda.device_count() > 0 else 1
    if a.report_device:
        report_device(torch)
    if a.mib == 0 and a.grow_to == 0:
        return 0
    held = [take(torch, a.mib)] if a.mib > 0 else []
    start = time.monotonic()
    uuid = device_uuid(torch.cuda.get_device_properties(0)) or "unknown"
    print("gpu-alloc pid=%d gpu=%s mem=%d" % (os.getpid(), uuid, a.mib), flush=True)
    end = start + a.hold
    if a.grow_to > a.mib:
        time.sleep(max(0.0, start + a.grow_after - time.monotonic()))
        held.append(take(torch, a.grow_to - a.mib))  # out of memory: the traceback ends the process
        print("gpu-alloc grew to mem=%d" % a.grow_to, flush=True)
        end = max(end, time.monotonic())
    time.sleep(max(0.0, end - time.monotonic()))
    del held
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
