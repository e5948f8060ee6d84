package agentless

import "swerl/internal/unidiff"

// Vote is rerank.py's majority vote without test rankers: each candidate's
// key is its normalized patch stripped as Python's str.strip() does, empty
// keys do not vote, the key with the most votes wins and a tie goes to the
// key seen first. It returns the index of the winning key's first candidate,
// and false when every key is empty (rerank then writes an empty patch).
func Vote(normalized []string) (int, bool) {
	type tally struct{ first, votes int }
	byKey := map[string]*tally{}
	var order []*tally // keys in first-seen order, for the tie-break
	for i, n := range normalized {
		k := unidiff.PyStrip(n)
		if k == "" {
			continue
		}
		t := byKey[k]
		if t == nil {
			t = &tally{first: i}
			byKey[k] = t
			order = append(order, t)
		}
		t.votes++
	}
	var best *tally
	for _, t := range order {
		if best == nil || t.votes > best.votes {
			best = t
		}
	}
	if best == nil {
		return 0, false
	}
	return best.first, true
}
