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

// A dependency's condition: an aggregate runs on a partial sweep (after
// each run ends, whichever way), a clean-up runs when a run fails, and the
// clean-up of a run that succeeded is not needed, which is no failure.
func Example_dependencyConditions() {
	runDir, _ := os.MkdirTemp("", "gpusched-example-")
	defer os.RemoveAll(runDir)
	s, err := gpusched.New(runDir, gpusched.Scheduling{MaxParallelTasks: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	err = s.SubmitMany([]gpusched.TaskSpec{
		{ID: "train-1", Payload: []string{"true"}},
		{ID: "train-2", Payload: []string{"false"}},
		{ID: "aggregate", Payload: []string{"true"}, Dependencies: []string{"train-1", "train-2"},
			DependencyOn: map[string]gpusched.DependencyCondition{"train-1": gpusched.AfterAny, "train-2": gpusched.AfterAny}},
		{ID: "clean-1", Payload: []string{"true"}, Dependencies: []string{"train-1"},
			DependencyOn: map[string]gpusched.DependencyCondition{"train-1": gpusched.AfterFailure}},
		{ID: "clean-2", Payload: []string{"true"}, Dependencies: []string{"train-2"},
			DependencyOn: map[string]gpusched.DependencyCondition{"train-2": gpusched.AfterFailure}},
	})
	if err != nil {
		log.Fatal(err)
	}
	records, _ := s.Run(context.Background())
	for _, r := range records {
		fmt.Printf("%s: %s %s (ok: %v)\n", r.ID, r.State, r.Error, r.OK())
	}
	// Output:
	// train-1: complete  (ok: true)
	// train-2: failed exit code 1 (ok: false)
	// aggregate: complete  (ok: true)
	// clean-1: blocked not needed: dependency "train-1" completed; this task runs on its failure (ok: true)
	// clean-2: complete  (ok: true)
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

// Artifacts: a task completes only if its files exist, and when the run
// resumes, a task whose files went missing runs again with everything
// downstream of it; the rest is kept. Plan tells in advance.
func Example_artifacts() {
	work, _ := os.MkdirTemp("", "gpusched-example-")
	defer os.RemoveAll(work)
	runDir := filepath.Join(work, "run")
	tasks := []gpusched.TaskSpec{
		{ID: "prepare", Dir: work, Payload: []string{"sh", "-c", "mkdir -p out && seq 100 > out/data.csv"},
			Artifacts: []string{"out/data.csv"}},
		{ID: "train", Dir: work, Dependencies: []string{"prepare"},
			Payload: []string{"sh", "-c", "wc -l < out/data.csv > out/model.pt"}, Artifacts: []string{"out/model.pt"}},
		{ID: "evaluate", Dir: work, Dependencies: []string{"train"},
			Payload: []string{"sh", "-c", "cat out/model.pt > out/score.txt"}, Artifacts: []string{"out/score.txt"}},
	}
	run := func() {
		s, err := gpusched.New(runDir, gpusched.Scheduling{}, gpusched.WithObserver(func(ev gpusched.Event) {
			if ev.Kind == gpusched.EventStarted {
				fmt.Println("  ran", ev.TaskID)
			}
		}))
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		if err := s.SubmitMany(tasks); err != nil {
			log.Fatal(err)
		}
		if _, err := s.Run(context.Background()); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("first run:")
	run()
	os.Remove(filepath.Join(work, "out/model.pt"))
	plan, _ := gpusched.Plan(runDir, tasks)
	for _, it := range plan {
		fmt.Printf("plan: %s run=%v (%s)\n", it.ID, it.Run, it.Why)
	}
	fmt.Println("second run:")
	run()
	// Output:
	// first run:
	//   ran prepare
	//   ran train
	//   ran evaluate
	// plan: prepare run=false (complete, kept)
	// plan: train run=true (artifact missing: out/model.pt)
	// plan: evaluate run=true (upstream train reruns)
	// second run:
	//   ran train
	//   ran evaluate
}
