package task

import (
	"encoding/json"
	"fmt"
)

// DecodeSpec reads a definition back from the JSON it was saved as,
// normalized, with a command's payload as the []string it was given as,
// so that its Fingerprint is the one it was saved with.
func DecodeSpec(b []byte) (Spec, error) {
	var sp Spec
	if err := json.Unmarshal(b, &sp); err != nil {
		return Spec{}, fmt.Errorf("decode task definition: %w", err)
	}
	sp.Normalize()
	if list, ok := sp.Payload.([]any); ok && sp.Kind == DefaultKind {
		args := make([]string, len(list))
		for i, a := range list {
			s, ok := a.(string)
			if !ok {
				return sp, nil
			}
			args[i] = s
		}
		sp.Payload = args
	}
	return sp, nil
}
