package gpusched_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gpusched/gpusched"
)

// The original library's README example: prepare, then train, at most two
// tasks at once. Records say what happened to each task.
func Example() {
	runDir, _ := os.MkdirTemp("", "gpusched-example-")
	defer os.RemoveAll(runDir)

	s, err := gpusched.New(filepath.Join(runDir, "example"), gpusched.Scheduling{MaxParallelTasks: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	err = s.SubmitMany([]gpusched.TaskSpec{
		{ID: "prepare", Payload: []string{"sh", "-c", "echo preparing"}},
		{ID: "train", Dependencies: []string{"prepare"}, Payload: []string{"sh", "-c", "echo training"},
			Resources: gpusched.ResourceRequest{Device: gpusched.CPU}},
	})
	if err != nil {
		log.Fatal(err)
	}
	records, err := s.Run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range records {
		fmt.Println(r.ID, r.State, len(r.Attempts), *r.ExitCode)
	}
	// Output:
	// prepare complete 1 0
	// train complete 1 0
}

// A failing task blocks what depends on it; independent work goes on.
func Example_failure() {
	runDir, _ := os.MkdirTemp("", "gpusched-example-")
	defer os.RemoveAll(runDir)

	s, err := gpusched.New(runDir, gpusched.Scheduling{DefaultRetries: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	err = s.SubmitMany([]gpusched.TaskSpec{
		{ID: "download", Payload: []string{"sh", "-c", "exit 3"}},
		{ID: "train", Dependencies: []string{"download"}, Payload: []string{"true"}},
		{ID: "lint", Payload: []string{"true"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	records, _ := s.Run(context.Background())
	for _, r := range records {
		fmt.Printf("%s: %s after %d attempt(s) %s\n", r.ID, r.State, len(r.Attempts), r.Error)
	}
	// Output:
	// download: failed after 2 attempt(s) exit code 3
	// train: blocked after 0 attempt(s) blocked: dependency "download" failed
	// lint: complete after 1 attempt(s)
}

// SubmitMany rejects a bad batch as a whole, with errors to test by kind.
func ExampleScheduler_SubmitMany_cycle() {
	runDir, _ := os.MkdirTemp("", "gpusched-example-")
	defer os.RemoveAll(runDir)
	s, _ := gpusched.New(runDir, gpusched.Scheduling{})
	defer s.Close()

	err := s.SubmitMany([]gpusched.TaskSpec{
		{ID: "a", Dependencies: []string{"c"}, Payload: []string{"true"}},
		{ID: "b", Dependencies: []string{"a"}, Payload: []string{"true"}},
		{ID: "c", Dependencies: []string{"b"}, Payload: []string{"true"}},
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, gpusched.ErrCycle), len(s.Records()))
	// Output:
	// dependency cycle: a -> c -> b -> a
	// true 0
}
