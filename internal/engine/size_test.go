package engine

import (
	"testing"
	"unsafe"
)

// A node is 512 bytes, one of the allocator's size classes: 8 bytes more
// put it in the 576-byte class, and a queue of 100,000 ready tasks costs
// decide about 30% more in garbage collection. A field that does not fit
// goes beside the node (as Engine.stopped does), or the node is regrouped.
func TestNodeFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n > 512 {
		t.Errorf("node is %d bytes, over 512", n)
	}
}
