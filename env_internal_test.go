package gpusched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOverlayIsDedupOfAll: the environment made from a base and what
// overrides it is what deduplicating all of it in turn gives, in the same
// order, with few overriding variables and with many (a map), with
// variables set twice in the base and in the overrides.
func TestOverlayIsDedupOfAll(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 14))
	key := func() string { return fmt.Sprintf("K%d", r.IntN(40)) }
	for round := range 300 {
		var base, vars []string
		for range r.IntN(30) {
			base = append(base, fmt.Sprintf("%s=b%d", key(), r.IntN(9)))
		}
		for range r.IntN(round%3*12 + 3) {
			vars = append(vars, fmt.Sprintf("%s=v%d", key(), r.IntN(9)))
		}
		// A map of one variable each, so that the order is known.
		var extras []map[string]string
		all := slices.Clone(base)
		for range r.IntN(round%4*8 + 1) {
			k, v := key(), fmt.Sprint(r.IntN(9))
			extras = append(extras, map[string]string{k: v})
			all = append(all, k+"="+v)
		}
		want := dedupEnv(append(all, vars...))
		got := overlay(dedupEnv(base), vars, extras)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: base %q extras %v vars %q:\n got %q\nwant %q", round, base, extras, vars, got, want)
		}
	}
}

// TestEnvironFollowsOwnEnvironment: environ is made from gpusched's
// environment as it is now, not as it was when it was last read.
func TestEnvironFollowsOwnEnvironment(t *testing.T) {
	t.Setenv("GPUSCHED_ENV_TEST", "one")
	if env := environ(nil); !slices.Contains(env, "GPUSCHED_ENV_TEST=one") {
		t.Fatalf("environ lacks GPUSCHED_ENV_TEST=one")
	}
	t.Setenv("GPUSCHED_ENV_TEST", "two")
	env := environ([]string{"A_VAR=x"})
	if !slices.Contains(env, "GPUSCHED_ENV_TEST=two") || slices.Contains(env, "GPUSCHED_ENV_TEST=one") {
		t.Errorf("environ after a change: GPUSCHED_ENV_TEST is not two alone")
	}
	if env[len(env)-1] != "A_VAR=x" {
		t.Errorf("environ's last variable = %q, want A_VAR=x", env[len(env)-1])
	}
}

// dedupScan, which dedupEnv uses for a few variables, gives what the map
// gives: the last value of each, in the order of the last settings.
func TestDedupScanIsDedupByMap(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 14))
	for range 500 {
		var env []string
		for range r.IntN(dedupByScan + 1) {
			// Keys that are prefixes of one another ("K1", "K12"), and
			// an entry without "=" now and then, as os.Environ may give.
			kv := fmt.Sprintf("K%d=%d", r.IntN(13), r.IntN(5))
			if r.IntN(10) == 0 {
				kv = fmt.Sprintf("K%d", r.IntN(13))
			}
			env = append(env, kv)
		}
		want := dedupEnv(append(slices.Clone(env), make([]string, dedupByScan)...)) // past dedupByScan: the map
		want = slices.DeleteFunc(want, func(s string) bool { return s == "" })
		if got := dedupScan(env); !slices.Equal(got, want) {
			t.Fatalf("dedupScan(%q) = %q, want %q", env, got, want)
		}
	}
}
