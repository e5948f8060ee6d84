package rollout

import (
	"fmt"
	"testing"
)

// TestGroupSeed: groups of one round and the same instance in two rounds
// get seeds far enough apart that their completions' seeds (GroupSeed+i)
// never coincide; a replayed group gets its seed again; seed 0 stays none.
func TestGroupSeed(t *testing.T) {
	const G = 16
	used := map[int64]string{}
	for round := range 50 {
		for inst := range 40 {
			gid := fmt.Sprintf("r%06d/inst-%d@swerl.instances@0:%d", round, inst, round*40+inst)
			s := GroupSeed(7, gid)
			if s <= 0 || s >= 1<<31-G {
				t.Fatalf("%s: seed %d outside (0, 2^31-G)", gid, s)
			}
			if again := GroupSeed(7, gid); again != s {
				t.Fatalf("%s: seed %d, then %d", gid, s, again)
			}
			for i := range int64(G) {
				if other, ok := used[s+i]; ok {
					t.Fatalf("%s completion %d shares seed %d with %s", gid, i, s+i, other)
				}
				used[s+i] = gid
			}
		}
	}
	if GroupSeed(8, "g") == GroupSeed(7, "g") {
		t.Fatal("the run seed does not change the group seed")
	}
	if s := GroupSeed(0, "g"); s != 0 {
		t.Fatalf("seed 0 (none) became %d", s)
	}
}
