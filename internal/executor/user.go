package executor

import (
	"fmt"
	"os/user"
	"strconv"
)

// User is a Unix user an attempt runs as.
type User struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"` // supplementary groups
	Name   string   `json:"name"`
	Home   string   `json:"home"`
}

// LookupUser reads uid's name, primary group, supplementary groups and home
// folder from the user database.
func LookupUser(uid uint32) (*User, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, fmt.Errorf("look up user %d: %w", uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("look up user %d: group %q: %w", uid, u.Gid, err)
	}
	out := &User{UID: uid, GID: uint32(gid), Name: u.Username, Home: u.HomeDir}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("look up the groups of user %s: %w", u.Username, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("look up the groups of user %s: group %q: %w", u.Username, id, err)
		}
		out.Groups = append(out.Groups, uint32(g))
	}
	return out, nil
}

// Env returns env with HOME, USER and LOGNAME set to u's, replacing any
// there.
func (u *User) Env(env []string) []string {
	return append(WithoutVars(env, "HOME", "USER", "LOGNAME"), "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
}

// WithoutVars returns a copy of env (KEY=VALUE) without the variables
// named, with room for a few more.
func WithoutVars(env []string, names ...string) []string {
	out := make([]string, 0, len(env)+3)
outer:
	for _, kv := range env {
		for _, n := range names {
			if len(kv) > len(n) && kv[len(n)] == '=' && kv[:len(n)] == n {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}
