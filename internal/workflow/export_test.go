package workflow

// InternalSpecForTest exposes internalSpec to the package's external tests.
var InternalSpecForTest = internalSpec
