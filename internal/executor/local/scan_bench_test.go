package local

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gpusched/gpusched/internal/procfs"
)

// BenchmarkCarriers is the token scan at an attempt's end, as for a short
// task: a leader just started, few PIDs handed out since. Each way the
// scan can go is timed: reading PID by PID, reading the processes a /proc
// listing shows after the leader, reading every process.
//
//	go test -run xxx -bench Carriers ./internal/executor/local
func BenchmarkCarriers(b *testing.B) {
	for _, mode := range []string{"probe", "listing", "every-process"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				cmd := exec.Command("sleep", "3600")
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				tr := &tracker{self: os.Getpid(), leader: cmd.Process.Pid, token: "bench", began: time.Now()}
				b.StartTimer()
				switch mode {
				case "probe":
					tr.carriers()
				case "listing":
					last, _ := procfs.LastPID()
					tr.scan(last, true)
				default:
					tr.scan(0, false)
				}
				b.StopTimer()
				cmd.Process.Kill()
				cmd.Wait()
				b.StartTimer()
			}
		})
	}
}
