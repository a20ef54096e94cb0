package gpusched_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
)

// opaque is a handler whose payloads are whatever the caller gives.
type opaque struct{}

func (opaque) Command(context.Context, *gpusched.TaskSpec, int) (gpusched.Command, error) {
	return gpusched.Command{}, errors.New("not run")
}
func (opaque) Judge(*gpusched.TaskSpec, gpusched.AttemptResult) error { return nil }

// SubmitMany reports the first problem in task order, whether it is a
// definition that cannot be encoded or one that is invalid, among enough
// commands for them to be encoded in parallel.
func TestSubmitManyFirstProblemInOrder(t *testing.T) {
	commands := func(n int) []gpusched.TaskSpec {
		out := make([]gpusched.TaskSpec, n)
		for i := range out {
			out[i] = gpusched.TaskSpec{ID: fmt.Sprintf("c%d", i), Payload: []string{"true"}}
		}
		return out
	}
	unencodable := gpusched.TaskSpec{ID: "chan", Kind: "opaque", Payload: make(chan int)}
	invalid := gpusched.TaskSpec{ID: "empty", Payload: []string{}}
	for _, c := range []struct {
		name  string
		tasks []gpusched.TaskSpec
		want  string
	}{
		{"unencodable first", append(append(commands(3000), unencodable), invalid), "chan"},
		{"invalid first", append(append(commands(3000), invalid), unencodable), "empty"},
	} {
		s, err := gpusched.New(t.TempDir(), gpusched.Scheduling{}, gpusched.WithHandler("opaque", opaque{}))
		if err != nil {
			t.Fatal(err)
		}
		err = s.SubmitMany(c.tasks)
		var te *gpusched.TaskError
		if !errors.As(err, &te) || te.TaskID != c.want {
			t.Errorf("%s: SubmitMany = %v, want an error about task %q", c.name, err, c.want)
		}
		if c.want == "chan" && !strings.Contains(err.Error(), "cannot be saved as JSON") {
			t.Errorf("%s: %v, want cannot be saved as JSON", c.name, err)
		}
		s.Close()
	}
}
