package report

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0ms", 350 * time.Millisecond: "350ms", 4100 * time.Millisecond: "4.1s", 12 * time.Second: "12s",
		184 * time.Second: "3m04s", 62 * time.Minute: "1h02m", 51 * time.Hour: "2d03h", -2 * time.Second: "-2.0s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%s) = %q, want %q", d, got, want)
		}
	}
	for v, want := range map[int64]string{0: "0 GiB", 512: "512 MiB", 81559: "79.6 GiB", 20480: "20 GiB"} {
		if got := fmtMiB(v); got != want {
			t.Errorf("fmtMiB(%d) = %q, want %q", v, got, want)
		}
	}
	if got := shorten("abcdef", 4); got != "abc…" {
		t.Errorf("shorten = %q", got)
	}
}
