package workflow_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched"
	"github.com/gpusched/gpusched/internal/workflow"
)

// inputs and hash_inputs land in their Go fields; a matrix's variables
// are substituted in inputs; the defaults' inputs come before a task's
// own, and a task without its own takes them.
func TestInputsKeys(t *testing.T) {
	t.Parallel()
	doc := `defaults:
  inputs: [src/]
  hash_inputs: true
tasks:
  - id: prep
    args: [x]
    inputs: [params.json, "data/*.csv"]
    hash_inputs: false
  - id: train-${lr}
    matrix: {lr: ["1e-3", "1e-4"]}
    args: [x]
    inputs: ["configs/${lr}.json"]
  - id: plain
    args: [x]
`
	w, err := workflow.Parse("/flows/in.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]gpusched.TaskSpec{}
	for _, tk := range w.Tasks {
		byID[tk.ID] = tk
	}
	tests := []struct {
		id     string
		inputs []string
		hash   bool
	}{
		{"prep", []string{"src/", "params.json", "data/*.csv"}, false},
		{"train-1e-3", []string{"src/", "configs/1e-3.json"}, true},
		{"train-1e-4", []string{"src/", "configs/1e-4.json"}, true},
		{"plain", []string{"src/"}, true},
	}
	for _, tt := range tests {
		tk := byID[tt.id]
		if !slices.Equal(tk.Inputs, tt.inputs) || tk.HashInputs != tt.hash {
			t.Errorf("%s: inputs %q, hash_inputs %v; want %q, %v", tt.id, tk.Inputs, tk.HashInputs, tt.inputs, tt.hash)
		}
	}
	// The defaults' list is copied, not shared: tasks do not see each
	// other's inputs.
	if &byID["plain"].Inputs[0] == &byID["prep"].Inputs[0] {
		t.Error("two tasks share the defaults' inputs slice")
	}
}

// A bad input is reported on its own line, also when the defaults' come
// first; a bad type on the key's line.
func TestInputsKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, want string }{
		{"a bad glob", "tasks:\n  - id: a\n    args: [x]\n    inputs:\n      - ok.json\n      - \"data/[a-\"\n",
			`:6: task "a": inputs[1]: "data/[a-" is not a valid glob`},
		{"an empty path", "tasks:\n  - id: a\n    args: [x]\n    inputs: [ok, \"\"]\n",
			`:4: task "a": inputs[1]: empty path`},
		{"after the defaults'", "defaults:\n  inputs: [src/, lib/]\ntasks:\n  - id: a\n    args: [x]\n    inputs:\n      - ok\n      - \"[\"\n",
			`:8: task "a": inputs[3]: "[" is not a valid glob`},
		{"in the defaults", "defaults:\n  inputs:\n    - \"[\"\ntasks:\n  - id: a\n    args: [x]\n",
			`:3: task "a": inputs[0]: "[" is not a valid glob`},
		{"not a list", "tasks:\n  - id: a\n    args: [x]\n    inputs: params.json\n",
			`:4: task "a": inputs must be a list`},
		{"not a bool", "tasks:\n  - id: a\n    args: [x]\n    hash_inputs: yes please\n",
			`:4: task "a": hash_inputs must be true or false`},
		{"an unknown variable", "tasks:\n  - id: a-${x}\n    matrix: {x: [1]}\n    args: [x]\n    inputs: [\"${y}.json\"]\n",
			`:5: task "a-${x}": inputs[0]: ${y}: the matrix has no variable y`},
	}
	for _, tt := range tests {
		_, err := workflow.Parse("/f.yaml", []byte(tt.doc))
		if err == nil || !strings.HasPrefix(err.Error(), "/f.yaml"+tt.want) {
			t.Errorf("%s:\n got %v\nwant prefix /f.yaml%s", tt.name, err, tt.want)
		}
		var we *workflow.Error
		if err != nil && !errors.As(err, &we) {
			t.Errorf("%s: %T is not a *workflow.Error", tt.name, err)
		}
	}
}
