#!/usr/bin/env bash
# Runs gpu.yaml against two fake GPUs: builds gpusched and the project's fake
# nvidia-smi and fake GPU job into ../bin, points gpusched at them, and runs.
#
#   examples/fake-gpus/run.sh [gpusched run flags...]
#
# While it runs, in another terminal:
#   GPUSCHED_NVIDIA_SMI=examples/bin/fake-nvidia-smi FAKE_GPU_STATE=examples/fake-gpus/.state.json \
#     go run ./cmd/gpusched status examples/fake-gpus/gpu.yaml
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$here/../bin"
mkdir -p "$bin"
(cd "$root" && go build -o "$bin/gpusched" ./cmd/gpusched &&
	go build -o "$bin/fake-nvidia-smi" ./cmd/fake-nvidia-smi &&
	go build -o "$bin/fake-gpu-job" ./cmd/fake-gpu-job)
cp "$here/cards.json" "$here/.state.json" # the fake driver's state: cards and processes
export GPUSCHED_NVIDIA_SMI="$bin/fake-nvidia-smi" FAKE_GPU_STATE="$here/.state.json"
exec "$bin/gpusched" run "$here/gpu.yaml" "$@"
