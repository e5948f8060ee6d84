// Package learnertest holds what the tests of gpu/learner and of `swerl
// learn` share: sample streams shaped as the train pipeline writes them,
// and readers of what a learner published (its weight announcements and
// its checkpoint directories).
package learnertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/schemas"
)

// Interleaved returns groups groups of G samples in the order the train
// pipeline's sink writes them under load: a member moves at most spread
// places from its group's slot (shuffled by rng), and every dupEvery-th
// row is written twice, right away (a replay after a crash of train).
// Group g's id is "o/r#g@0", its members' rewards 0..G-1 with their GRPO
// advantages. ids are the distinct sample ids, sorted.
func Interleaved(rng *rand.Rand, groups, G, spread, dupEvery int) (rows []schemas.Sample, ids []string) {
	type member struct{ g, i int }
	var order []member
	for g := range groups {
		for i := range G {
			order = append(order, member{g, i})
		}
	}
	for i := range order {
		j := min(len(order)-1, i+rng.IntN(spread))
		order[i], order[j] = order[j], order[i]
	}
	for k, m := range order {
		gid := fmt.Sprintf("o/r#%d@0", m.g)
		s := schemas.Sample{Rollout: schemas.Rollout{SchemaVersion: schemas.Version, ID: fmt.Sprintf("%s/%d", gid, m.i),
			InstanceID: fmt.Sprintf("o/r#%d", m.g), GroupID: gid, GroupSize: G, Index: m.i, PolicyVersion: -1,
			Prompt: "fix it", Completion: fmt.Sprint("edit ", m.i), FinishReason: "stop"},
			Reward: float64(m.i), Advantage: float64(m.i) - float64(G-1)/2, GroupComplete: true}
		rows = append(rows, s)
		ids = append(ids, s.ID)
		if k%dupEvery == dupEvery-1 {
			rows = append(rows, s)
		}
	}
	slices.Sort(ids)
	return rows, ids
}

// Announced returns the weight versions announced on topic, read from its
// partitions 0..partitions-1 until each has been quiet for half a second.
func Announced(t testing.TB, ctx context.Context, brokers []string, topic string, partitions int) map[int64]bool {
	t.Helper()
	seen := map[int64]bool{}
	for p := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
		for {
			rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			m, err := r.ReadMessage(rctx)
			cancel()
			if err != nil {
				break
			}
			var wv schemas.WeightVersion
			if err := schemas.Decode(m.Value, &wv); err != nil {
				r.Close()
				t.Fatalf("%s@%d:%d: %v", topic, p, m.Offset, err)
			}
			seen[wv.Version] = true
		}
		r.Close()
	}
	return seen
}

// CheckpointDirs returns the names of the version directories under
// out/checkpoints, sorted.
func CheckpointDirs(t testing.TB, out string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(out, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		dirs = append(dirs, e.Name())
	}
	return dirs
}
