package agentless

// MajorityVote is rerank.py's vote with no test rankers: each candidate's
// key is its normalized patch stripped of surrounding whitespace; empty
// keys take no part; the key with most votes wins and ties go to the key
// seen first. It returns the index of the winning key's first candidate,
// or -1 when every key is empty.
func MajorityVote(normalized []string) int {
	type tally struct{ first, votes int }
	byKey := map[string]*tally{}
	var order []string
	for i, n := range normalized {
		k := pyStrip(n)
		if k == "" {
			continue
		}
		t, ok := byKey[k]
		if !ok {
			t = &tally{first: i}
			byKey[k] = t
			order = append(order, k)
		}
		t.votes++
	}
	best := -1
	bestVotes := 0
	for _, k := range order {
		if t := byKey[k]; t.votes > bestVotes {
			best, bestVotes = t.first, t.votes
		}
	}
	return best
}
