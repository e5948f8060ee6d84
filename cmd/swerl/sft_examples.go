package main

import (
	"flag"

	"swerl/gpu/learner"
)

// sftExamples returns the SFT examples the flags name.
func sftExamples(pairs string, fs *flag.FlagSet) ([]learner.Example, error) {
	if pairs == "" {
		return nil, usagef("want --pairs FILE.jsonl")
	}
	return loadPairs(pairs)
}
