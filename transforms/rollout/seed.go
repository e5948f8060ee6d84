package rollout

import (
	"encoding/binary"
	"hash/fnv"
)

// GroupSeed is the sampling seed of one group: the run's seed mixed with
// the group id, so that groups draw independent completions (a policy
// seeds completion i with GroupSeed+i) and a replayed group draws the same.
// Seed 0 (none: the policy's own randomness) stays 0.
func GroupSeed(seed int64, groupID string) int64 {
	if seed == 0 {
		return 0
	}
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(groupID))
	// 30 bits: servers that take a 32-bit seed (llama.cpp) get it whole,
	// with room for +i.
	return int64(h.Sum64()>>34) | 1
}
