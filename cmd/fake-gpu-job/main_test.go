package main

import (
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args   []string
		want   options
		errMsg string
	}{
		{args: nil, want: options{name: "fake-gpu-job"}},
		{
			args: []string{"--mem", "100", "--grow-to=300", "--grow-after", "500ms", "--duration", "2s",
				"--exit", "3", "--name", "train", "--record", "/tmp/r"},
			want: options{mem: 100, growTo: 300, growAfter: 500 * time.Millisecond, duration: 2 * time.Second,
				exit: 3, name: "train", recordTo: "/tmp/r"},
		},
		{args: []string{"--mem", "-1"}, errMsg: "--mem must not be negative"},
		{args: []string{"--mem", "300", "--grow-to", "200"}, errMsg: "--grow-to must not be below --mem"},
		{args: []string{"--duration", "-1s"}, errMsg: "durations must not be negative"},
		{args: []string{"--mem", "lots"}, errMsg: `invalid value "lots" for flag -mem: parse error`},
		{args: []string{"--gpus", "1"}, errMsg: "flag provided but not defined: -gpus"},
		{args: []string{"extra"}, errMsg: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		got, err := parseArgs(tt.args)
		switch {
		case tt.errMsg != "":
			if err == nil || err.Error() != tt.errMsg {
				t.Errorf("parseArgs(%q) error = %v, want %q", tt.args, err, tt.errMsg)
			}
		case err != nil || got != tt.want:
			t.Errorf("parseArgs(%q) = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}
