package executor

import "errors"

// Placeholder sentinels until the executor branch lands (it defines them).
var (
	ErrEnvironment = errors.New("fault of the environment")
	ErrCommand     = errors.New("command cannot run")
)
