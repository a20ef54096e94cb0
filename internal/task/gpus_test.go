package task

import (
	"slices"
	"testing"
)

func TestGPUCount(t *testing.T) {
	for _, tt := range []struct {
		r    ResourceRequest
		want int
	}{
		{ResourceRequest{Device: CPU}, 0},
		{ResourceRequest{}, 0},
		{ResourceRequest{Device: CUDA, MemoryMiB: 1}, 1},
		{ResourceRequest{Device: CUDA, MemoryMiB: 1, GPUs: 1}, 1},
		{ResourceRequest{Device: CUDA, MemoryMiB: 1, GPUs: 4}, 4},
	} {
		if got := tt.r.GPUCount(); got != tt.want {
			t.Errorf("%+v.GPUCount() = %d, want %d", tt.r, got, tt.want)
		}
	}
}

func TestAttemptCards(t *testing.T) {
	three := 3
	for _, tt := range []struct {
		a    Attempt
		want []int
	}{
		{Attempt{}, nil},
		{Attempt{GPU: &three}, []int{3}},
		{Attempt{GPU: &three, GPUs: []int{3, 1}}, []int{3, 1}},
	} {
		if got := tt.a.Cards(); !slices.Equal(got, tt.want) {
			t.Errorf("Cards() = %v, want %v", got, tt.want)
		}
	}
}
