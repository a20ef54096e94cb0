package cli

import (
	"reflect"
	"testing"

	"github.com/gpusched/gpusched"
)

// specView's fields are gpusched.TaskSpec's, of the same types and JSON
// names, so that status reads them as it read the whole definition.
func TestSpecViewKeepsTaskSpecNames(t *testing.T) {
	whole := reflect.TypeFor[gpusched.TaskSpec]()
	view := reflect.TypeFor[specView]()
	for i := range view.NumField() {
		f := view.Field(i)
		w, ok := whole.FieldByName(f.Name)
		if !ok {
			t.Errorf("TaskSpec has no field %s", f.Name)
			continue
		}
		if w.Type != f.Type || w.Tag.Get("json") != f.Tag.Get("json") {
			t.Errorf("field %s: %v `json:%q` in specView, %v `json:%q` in TaskSpec", f.Name, f.Type, f.Tag.Get("json"), w.Type, w.Tag.Get("json"))
		}
	}
}
