package workflow

// InternalSpecForTest exposes internalSpec to the package's external tests.
var InternalSpecForTest = internalSpec

// SetMaxVariants makes MaxVariants n until the test ends. The test must
// not be parallel (parallel tests wait until it has ended).
func SetMaxVariants(t interface{ Cleanup(func()) }, n int) {
	old := maxVariants
	maxVariants = n
	t.Cleanup(func() { maxVariants = old })
}
