package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// deliberateDefault matches the reason a command gives in its help for a
// default that differs from the other commands' (the flag set takes the
// default as a parameter and appends why).
var deliberateDefault = regexp.MustCompile(`; swerl [a-z]+'s default .*$`)

// sameNameOtherConcept lists the flags that two commands share by name but
// not by meaning, each with the reason; their help may differ. Every other
// flag shared by two commands must have the same help and default, up to a
// deliberateDefault reason.
var sameNameOtherConcept = map[string]string{
	"out":         "each command's output: an output root, a predictions file, a results file",
	"in":          "the file each command reads: conformance lines (agentless check) or records to score (reward, where - is stdin)",
	"instances":   "the input each command reads: SWE-bench rows (agentless), instances to evaluate, to rescore, to train on, or the Parquet folder to explain",
	"model":       "a model to start training from, to evaluate, or to serve",
	"policy":      "eval, train and agentless sample from any policy; run's --policy is an engine that its learner pushes versions to",
	"repo":        "a repository to mine (mine, run) or a clone holding the rows' base commits (import, agentless)",
	"repos":       "mine reads a list of repositories; agentless a map from repository names to clones",
	"batch":       "run: instances per RL step; sft: examples per optimizer step",
	"concurrency": "agentless: instances in flight; train: policy requests in flight",
	"max-files":   "mine: a filter on changes; agentless: localized files; train and eval: a prompt cap",
	"max-tokens":  "a completion's length: per answer (agentless), a cap (eval, train), run's rollouts, serve's default for requests that give none",
	"samples":     "learn reads samples to train on; explain the samples to join",
	"seed":        "run seeds its model, split and sampling; train and agentless pass a sampling seed to the policy",
	"steps":       "learn stops after N optimizer steps (0: the input's end); sft's warm start has N steps in all, resumed or not; run takes N RL rounds",
	"temperature": "learn's is the trainer's (the distribution the samples came from); the others sample at it",
	"resume":      "learn and sft resume a learner's checkpoints; run resumes a whole run (run.json)",
	"addr":        "broker listens for Kafka clients, serve for HTTP clients",
	"brokers":     "mine publishes to Kafka only when given; replay reads an existing topic and needs it; the others start an embedded broker without it",
	"model-name":  "eval names its predictions after its model or policy by default; agentless after swerl",
	"v":           "mine and train log Beam's progress; run logs the learner too",
}

// subcommandHelp are the -h calls of commands whose flags belong to their
// subcommands.
var subcommandHelp = map[string][][]string{
	"model":     {{"init", "-h"}, {"info", "-h"}, {"merge", "-h"}},
	"agentless": {{"check", "-h"}},
}

// TestSharedFlagsAgree runs every command with -h and checks that a flag
// name two commands share means the same: the same help and default, or a
// default the command says why it differs from (deliberateDefault), or a
// name listed in sameNameOtherConcept. It also checks that -h prints
// swerl's own flags before Beam's.
func TestSharedFlagsAgree(t *testing.T) {
	type use struct {
		cmd        string
		def, usage string
		base, why  string
	}
	byName := map[string][]use{}
	var names []string
	for n := range commands {
		if !strings.HasPrefix(n, "test-") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		var sets []*flag.FlagSet
		newFlagsHook = func(fs *flag.FlagSet) { sets = append(sets, fs) }
		for _, args := range append([][]string{{"-h"}}, subcommandHelp[n]...) {
			var help bytes.Buffer
			commands[n].run(context.Background(), args, io.Discard, &help)
			if b := strings.Index(help.String(), "Beam runner"); b >= 0 && strings.Contains(help.String()[b:], "\nFlags:") {
				t.Errorf("swerl %s %v prints swerl's own flags after Beam's", n, args)
			}
		}
		newFlagsHook = nil
		if len(sets) == 0 {
			t.Errorf("swerl %s -h made no FlagSet through newFlags", n)
			continue
		}
		for _, fs := range sets {
			fs.VisitAll(func(f *flag.Flag) {
				if strings.HasPrefix(f.Usage, beamUsagePrefix) {
					return
				}
				u := use{cmd: fs.Name(), def: f.DefValue, usage: f.Usage, base: f.Usage}
				if loc := deliberateDefault.FindStringIndex(f.Usage); loc != nil {
					u.base, u.why = f.Usage[:loc[0]], f.Usage[loc[0]:]
				}
				byName[f.Name] = append(byName[f.Name], u)
			})
		}
	}
	for name, uses := range byName {
		if len(uses) < 2 {
			continue
		}
		if reason, ok := sameNameOtherConcept[name]; ok {
			if reason == "" {
				t.Errorf("--%s is listed as another concept without a reason", name)
			}
			continue
		}
		// The default most commands share; a command that differs says why.
		count := map[string]int{}
		for _, u := range uses {
			if u.why == "" {
				count[u.def]++
			}
		}
		common, n := "", -1
		for d, c := range count {
			if c > n || c == n && d < common {
				common, n = d, c
			}
		}
		for _, u := range uses {
			if u.base != uses[0].base {
				t.Errorf("--%s: %s says %q, %s says %q", name, uses[0].cmd, uses[0].base, u.cmd, u.base)
			}
			if u.def != common && u.why == "" {
				t.Errorf("--%s: %s's default %q differs from %q and its help does not say why", name, u.cmd, u.def, common)
			}
		}
	}
	for name := range sameNameOtherConcept {
		if len(byName[name]) < 2 {
			t.Errorf("sameNameOtherConcept lists --%s, which is no longer shared", name)
		}
	}
}
