package supervise

import (
	"reflect"
	"testing"

	"github.com/gpusched/gpusched/internal/executor"
)

// TestJobUserCrosses: the user an attempt runs as reaches the supervisor.
func TestJobUserCrosses(t *testing.T) {
	u := &executor.User{UID: 1001, GID: 1002, Groups: []uint32{1002, 27}, Name: "alice", Home: "/home/alice"}
	s, err := specOf(executor.Job{TaskID: "t", Attempt: 1, Args: []string{"true"}, Dir: "/", LogPath: "/x/l", User: u}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.job().User; !reflect.DeepEqual(got, u) {
		t.Errorf("user = %+v, want %+v", got, u)
	}
}
