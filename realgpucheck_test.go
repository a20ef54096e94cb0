package gpusched_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/internal/testbin"
)

// The real-GPU check (scripts/real-gpu-check.sh) waits for a machine with
// an NVIDIA GPU; these tests run its logic here, against the project's fake
// nvidia-smi and fake GPU job (--dry-run), and its allocator helper against
// a stand-in torch module, so that the day a GPU is lent the script works
// the first time.

const gpuCheckScript = "scripts/real-gpu-check.sh"

// gpuCheckBins are the binaries a dry run needs.
type gpuCheckBins struct{ gpusched, smi, job string }

func buildGPUCheckBins(t *testing.T) gpuCheckBins {
	t.Helper()
	var b gpuCheckBins
	for _, p := range []struct {
		dst *string
		pkg string
	}{{&b.gpusched, "cmd/gpusched"}, {&b.smi, "cmd/fake-nvidia-smi"}, {&b.job, "cmd/fake-gpu-job"}} {
		bin, err := testbin.Build(p.pkg)
		if err != nil {
			t.Fatal(err)
		}
		*p.dst = bin
	}
	return b
}

// gpuCheckEnv is the environment without anything that would point the
// script at a GPU, real or fake, plus extra.
func gpuCheckEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "GPUSCHED_NVIDIA_SMI", name == "FAKE_GPU_STATE", strings.HasPrefix(name, "CUDA_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// runGPUCheck runs the script with args and env and returns what it printed
// and its exit status.
func runGPUCheck(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command("bash", append([]string{gpuCheckScript}, args...)...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("run %s: %v\n%s", gpuCheckScript, err, out.String())
	return "", -1
}

// verdicts returns the script's verdict lines by check id: "PASS", "FAIL"
// or "SKIP", with the rest of the line.
func verdicts(out string) map[string]string {
	v := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(PASS|FAIL|SKIP) +(\S+) +(.*)$`).FindAllStringSubmatch(out, -1) {
		v[m[2]] = m[1] + " " + m[3]
	}
	return v
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRealGPUCheckScriptParses(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if out, err := exec.Command("bash", "-n", gpuCheckScript).CombinedOutput(); err != nil {
		t.Fatalf("bash -n %s: %v\n%s", gpuCheckScript, err, out)
	}
	out, code := runGPUCheck(t, gpuCheckEnv(), "--only", "7", t.TempDir())
	if code != 2 || !strings.Contains(out, "--only takes check numbers 1-6") {
		t.Errorf("--only 7: exit %d, want 2 with a message\n%s", code, out)
	}
}

// Without a GPU the script says so, checks nothing and exits 0, whether
// nvidia-smi is missing or fails.
func TestRealGPUCheckWithoutGPU(t *testing.T) {
	b := buildGPUCheckBins(t)
	dir := t.TempDir()
	broken := writeFile(t, filepath.Join(dir, "driver-failure.json"),
		`{"mode": "driver-failure", "cards": [{"index": 0, "uuid": "GPU-1", "total_mib": 81559}]}`, 0o644)
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no nvidia-smi", []string{"GPUSCHED_NVIDIA_SMI=" + filepath.Join(dir, "missing", "nvidia-smi")},
			"no NVIDIA GPU here: nvidia-smi not found"},
		{"nvidia-smi fails", []string{"GPUSCHED_NVIDIA_SMI=" + b.smi, "FAKE_GPU_STATE=" + broken},
			"failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			// No --gpusched: without a GPU the script needs no binary.
			got, code := runGPUCheck(t, gpuCheckEnv(tc.env...), out)
			if code != 0 || !strings.Contains(got, tc.want) || !strings.Contains(got, "Nothing was checked") {
				t.Errorf("exit %d, want 0 and %q, \"Nothing was checked\":\n%s", code, tc.want, got)
			}
			if v := verdicts(got); len(v) > 0 {
				t.Errorf("checked something without a GPU: %v", v)
			}
			if s, err := os.ReadFile(filepath.Join(out, "summary.txt")); err != nil || !strings.Contains(string(s), "nothing checked") {
				t.Errorf("summary.txt = %q, %v; want it to say nothing was checked", s, err)
			}
		})
	}
}

// The whole script against the fakes: every check a fake can exercise
// passes, what needs a real driver is skipped with a reason, and the
// captures are where the docs say.
func TestRealGPUCheckDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs six workflows (about 30s)")
	}
	b := buildGPUCheckBins(t)
	out := t.TempDir()
	got, code := runGPUCheck(t, gpuCheckEnv(), "--dry-run", "--gpusched", b.gpusched,
		"--fake-smi", b.smi, "--fake-job", b.job, out)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	v := verdicts(got)
	for _, id := range []string{"1", "1-pid", "2", "3", "4", "5", "6"} {
		if !strings.HasPrefix(v[id], "PASS") {
			t.Errorf("check %s: %q, want PASS", id, v[id])
		}
	}
	for _, id := range []string{"1-ctx", "3-ctx", "5-torch", "6-torch"} {
		if !strings.HasPrefix(v[id], "SKIP") || !strings.Contains(v[id], "dry run") {
			t.Errorf("check %s: %q, want SKIP saying why (dry run)", id, v[id])
		}
	}
	if !strings.Contains(got, "summary: 7 PASS, 0 FAIL, 4 SKIP") {
		t.Errorf("no summary line with 7 PASS, 0 FAIL, 4 SKIP")
	}
	// The dry run picks the emptier fake card, card 1, so the task's
	// CUDA_VISIBLE_DEVICES must say 1.
	if !strings.Contains(v["6"], "CUDA_VISIBLE_DEVICES=1 CUDA_DEVICE_ORDER=PCI_BUS_ID") {
		t.Errorf("check 6: %q, want the task on card 1", v["6"])
	}
	for file, want := range map[string]string{
		"nvidia-smi/idle-query-gpu-csv.txt":           "index, uuid, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n0, GPU-f00dcafe",
		"nvidia-smi/load-query-compute-apps-csv.txt":  "pid, gpu_uuid, used_memory [MiB]\n",
		"nvidia-smi/load3-query-compute-apps-csv.txt": "44320 MiB",
		"check2-packing/report.html":                  "pack-5 · attempt 1 · complete",
		"check2-packing/status.json":                  `"memory_mib": 44576`,
		"check3-reconcile/events.jsonl":               `"event":"started","task":"other"`,
		"check5-oom/run/logs/too-big.attempt-1.log":   "CUDA out of memory. Tried to allocate 172525 MiB",
		"summary.txt": "PASS 6",
		"check.log":   "summary: 7 PASS",
	} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v; want it to contain %q; it has:\n%.600s", file, err, want, b)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}

// Each check can fail: faults injected into the fakes make the check that
// is about them fail, and the script exit 1. Only that check runs.
func TestRealGPUCheckDryRunCatchesFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs workflows")
	}
	b := buildGPUCheckBins(t)
	dir := t.TempDir()
	// A job that takes twice what it was told to.
	greedy := writeFile(t, filepath.Join(dir, "greedy-job"), `#!/bin/sh
while [ $# -gt 0 ]; do
	if [ "$1" = --mem ]; then set -- "$@" --mem $(($2 * 2)); shift 2; continue; fi
	break
done
exec `+b.job+` "$@"
`, 0o755)
	// nvidia-smi that lists no compute processes, as in a container that
	// cannot see the host's PIDs: usage cannot be put on our tasks.
	blind := writeFile(t, filepath.Join(dir, "blind-nvidia-smi"), `#!/bin/sh
case "$1" in
--query-compute-apps=*) `+b.smi+` "$@" | head -n 1 ;;
*) exec `+b.smi+` "$@" ;;
esac
`, 0o755)
	// nvidia-smi that shows every card empty: memory held by others is
	// invisible.
	hiding := writeFile(t, filepath.Join(dir, "hiding-nvidia-smi"), `#!/bin/sh
case "$1" in
--query-gpu=*) `+b.smi+` "$@" | awk 'BEGIN { FS = OFS = ", " } NR > 1 { $5 = "0 MiB"; $6 = $4 } { print }' ;;
*) exec `+b.smi+` "$@" ;;
esac
`, 0o755)
	// A job that reports its failed allocation in GiB with two decimals,
	// as PyTorch does: the retry budget must still be the documented one.
	gib := writeFile(t, filepath.Join(dir, "gib-job"), `#!/bin/sh
err=$(mktemp)
`+b.job+` "$@" 2>"$err"
rc=$?
awk '{ if (match($0, /Tried to allocate [0-9]+ MiB/)) { n = substr($0, RSTART + 18, RLENGTH - 22); $0 = substr($0, 1, RSTART - 1) sprintf("Tried to allocate %.2f GiB", n / 1024) substr($0, RSTART + RLENGTH) } print }' "$err" >&2
rm -f "$err"
exit $rc
`, 0o755)
	small := writeFile(t, filepath.Join(dir, "small.json"),
		`{"cards": [{"index": 0, "uuid": "GPU-small", "name": "NVIDIA T400 4GB", "total_mib": 4096}]}`, 0o644)

	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		code    int
		id      string
		verdict string // the check's line starts with this
		says    string // and contains this
	}{
		{name: "jobs take more than they declare", args: []string{"--only", "2", "--fake-job", greedy},
			code: 1, id: "2", verdict: "FAIL", says: "CUDA out of memory in pack-"},
		{name: "compute-apps lists nobody", env: []string{"GPUSCHED_NVIDIA_SMI=" + blind}, args: []string{"--only", "3"},
			code: 1, id: "3", verdict: "FAIL", says: "liar: peak seen 0 MiB, want >= the 50982 MiB it allocated"},
		{name: "compute-apps lists nobody, seen by check 1", env: []string{"GPUSCHED_NVIDIA_SMI=" + blind}, args: []string{"--only", "1"},
			code: 1, id: "1-pid", verdict: "FAIL", says: "compute-apps does not list the allocator's pid"},
		{name: "nvidia-smi hides foreign memory", env: []string{"GPUSCHED_NVIDIA_SMI=" + hiding}, args: []string{"--only", "4"},
			code: 1, id: "4", verdict: "FAIL", says: "waited until it was gone"},
		{name: "out of memory in GiB", args: []string{"--only", "5", "--fake-job", gib},
			code: 0, id: "5", verdict: "PASS", says: "GiB"},
		{name: "budget spent", args: []string{"--only", "2", "--budget", "1"},
			code: 1, id: "2", verdict: "FAIL", says: "packing: not run: "},
		{name: "card too small", env: []string{"FAKE_GPU_STATE=" + small},
			code: 1, id: "setup", verdict: "FAIL", says: "card 0 has 4096 MiB; the checks need at least 16384"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			args := append([]string{"--dry-run", "--gpusched", b.gpusched, "--fake-smi", b.smi}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--fake-job") {
				args = append(args, "--fake-job", b.job)
			}
			got, code := runGPUCheck(t, gpuCheckEnv(tc.env...), append(args, out)...)
			v := verdicts(got)
			if code != tc.code || !strings.HasPrefix(v[tc.id], tc.verdict) || !strings.Contains(v[tc.id], tc.says) {
				t.Errorf("exit %d, check %s: %q\nwant exit %d, %s containing %q\noutput:\n%s",
					code, tc.id, v[tc.id], tc.code, tc.verdict, tc.says, got)
			}
		})
	}
}

// The allocator helper for real runs, against a stand-in torch module: the
// line the script reads, what the task sees, PyTorch's out-of-memory
// traceback, and a clear failure without torch.
func TestGPUAllocHelper(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake")
	if err := os.MkdirAll(filepath.Join(fake, "torch"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A torch with one 4 GiB device whose memory runs out, and the
	// exception PyTorch raises then.
	writeFile(t, filepath.Join(fake, "torch", "__init__.py"), `import os
__version__ = "0.0-stand-in"
uint8 = "uint8"
class version:
    cuda = "12.0"
class OutOfMemoryError(RuntimeError):
    pass
_free = [4096 << 20]
class _Props:
    name = "Stand-in GPU"
    total_memory = 4096 << 20
    uuid = "0b42632a-bc5c-f731-724b-6936a19c4b24"
    pci_bus_id = 0x2a
    pci_device_id = 0
    pci_domain_id = 0
class _Tensor:
    def fill_(self, v):
        return self
class cuda:
    @staticmethod
    def device_count():
        return 0 if os.environ.get("CUDA_VISIBLE_DEVICES") == "" else 1
    @staticmethod
    def is_available():
        return cuda.device_count() > 0
    @staticmethod
    def get_device_properties(i):
        return _Props()
    @staticmethod
    def synchronize():
        pass
def empty(n, dtype=None, device=None):
    if cuda.device_count() == 0:
        raise RuntimeError("No CUDA GPUs are available")
    if n > _free[0]:
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity of 4.00 GiB of which %.2f GiB is free." % (n / 2**30, _free[0] / 2**30))
    _free[0] -= n
    return _Tensor()
`, 0o644)
	notorch := filepath.Join(dir, "notorch")
	if err := os.MkdirAll(notorch, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(notorch, "torch.py"), "raise ImportError('no torch on this machine (test)')\n", 0o644)

	run := func(pythonpath string, env []string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(py, append([]string{"scripts/gpu-alloc.py"}, args...)...)
		cmd.Env = gpuCheckEnv(append([]string{"PYTHONPATH=" + pythonpath}, env...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}

	t.Run("without torch", func(t *testing.T) {
		_, stderr, code := run(notorch, nil, "--mib", "10")
		if code != 3 || !strings.Contains(stderr, "PyTorch cannot be imported here") {
			t.Errorf("exit %d, stderr %q; want 3 and a clear message", code, stderr)
		}
	})
	t.Run("allocates and reports", func(t *testing.T) {
		stdout, stderr, code := run(fake, []string{"CUDA_VISIBLE_DEVICES=1", "CUDA_DEVICE_ORDER=PCI_BUS_ID"},
			"--mib", "1000", "--grow-to", "1500", "--report-device")
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^env CUDA_VISIBLE_DEVICES=1$`),
			regexp.MustCompile(`(?m)^torch device_count=1$`),
			regexp.MustCompile(`(?m)^torch device0 name=Stand-in_GPU uuid=GPU-0b42632a-bc5c-f731-724b-6936a19c4b24 total_mib=4096 pci_bus_id=00000000:2A:00.0$`),
			// The line the check script reads from the fake job too.
			regexp.MustCompile(`(?m)^gpu-alloc pid=[0-9]+ gpu=GPU-0b42632a-bc5c-f731-724b-6936a19c4b24 mem=1000$`),
			regexp.MustCompile(`(?m)^gpu-alloc grew to mem=1500$`),
		} {
			if !want.MatchString(stdout) {
				t.Errorf("stdout lacks %v:\n%s", want, stdout)
			}
		}
		if code != 0 {
			t.Errorf("exit %d: %s", code, stderr)
		}
	})
	t.Run("out of memory", func(t *testing.T) {
		stdout, stderr, code := run(fake, []string{"CUDA_VISIBLE_DEVICES=0"}, "--mib", "1000", "--grow-to", "8000")
		if code != 1 || !regexp.MustCompile(`(?m)^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 6\.84 GiB`).MatchString(stderr) {
			t.Errorf("exit %d, stderr:\n%s\nwant 1 and PyTorch's error as the last traceback line", code, stderr)
		}
		if !strings.Contains(stdout, "mem=1000") || strings.Contains(stdout, "grew") {
			t.Errorf("stdout %q: want the first allocation and no growth", stdout)
		}
	})
	t.Run("no device in a CPU task", func(t *testing.T) {
		stdout, _, code := run(fake, []string{"CUDA_VISIBLE_DEVICES="}, "--mib", "10", "--report-device")
		if code == 0 || !strings.Contains(stdout, "torch device_count=0") || strings.Contains(stdout, "gpu-alloc pid=") {
			t.Errorf("exit %d, stdout %q; want no device and a failure", code, stdout)
		}
	})
}
