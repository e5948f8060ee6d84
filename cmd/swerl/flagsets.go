package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"swerl/sinks/kafkaio"
	"swerl/sinks/weightsync"
	"swerl/transforms/advantage"
	"swerl/transforms/reward"
)

// A command's flags are printed by concept: its own flags first, then each
// flag set it shares with other commands (model and trainer, GRPO, LoRA,
// prompt, engines, Kafka) under its own heading, and Beam's runner flags
// last. A flag set opens its heading with section and closes it with
// endSection; the flags defined in between belong to it.

type flagSection struct {
	title  string
	before map[string]bool // the flags defined before the section opened
}

var (
	sectionsMu sync.Mutex
	sections   = map[*flag.FlagSet][]flagSection{}
)

// section starts a heading: the flags defined on fs from now on belong to
// title, until the next section or endSection.
func section(fs *flag.FlagSet, title string) {
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	sectionsMu.Lock()
	sections[fs] = append(sections[fs], flagSection{title: title, before: before})
	sectionsMu.Unlock()
}

// endSection returns to the command's own flags.
func endSection(fs *flag.FlagSet) { section(fs, "") }

// beamUsagePrefix starts the usage of every Beam flag a command takes over
// (addBeamFlags).
const beamUsagePrefix = "Beam: "

// printFlags writes fs's flags as flag.PrintDefaults does, grouped: the
// command's own, then each section in the order it was opened, then Beam's.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	sectionsMu.Lock()
	secs := sections[fs]
	sectionsMu.Unlock()
	var titles []string
	groups := map[string][]*flag.Flag{}
	add := func(title string, f *flag.Flag) {
		if _, ok := groups[title]; !ok {
			titles = append(titles, title)
		}
		groups[title] = append(groups[title], f)
	}
	titles = append(titles, "")
	groups[""] = nil
	for _, s := range secs {
		if _, ok := groups[s.title]; !ok {
			titles = append(titles, s.title)
			groups[s.title] = nil
		}
	}
	const beam = "Beam runner (Beam's own flags; swerl passes them to the runner)"
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, beamUsagePrefix) {
			add(beam, f)
			return
		}
		// The last section opened before f was defined; none: the
		// command's own.
		title := ""
		for _, s := range secs {
			if !s.before[f.Name] {
				title = s.title
			}
		}
		add(title, f)
	})
	for _, t := range titles {
		fl := groups[t]
		if len(fl) == 0 {
			continue
		}
		if t == "" {
			fmt.Fprintf(w, "Flags:\n")
		} else {
			fmt.Fprintf(w, "\n%s:\n", t)
		}
		sub := flag.NewFlagSet("", flag.ContinueOnError)
		sub.SetOutput(w)
		for _, f := range fl {
			sub.Var(f.Value, f.Name, strings.TrimPrefix(f.Usage, beamUsagePrefix))
			sub.Lookup(f.Name).DefValue = f.DefValue
		}
		sub.PrintDefaults()
	}
}

// The flags below are each one concept that several commands take; each is
// defined here once. A command that deliberately uses another default
// passes it with the reason, which -h prints after the help
// ("; swerl run's default …").

// deliberate returns the help of a flag whose default differs in this
// command, and why.
func deliberate(usage, why string) string {
	if why == "" {
		return usage
	}
	return usage + "; " + why
}

func addAdvantageFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "advantage", "grpo", "advantage estimator: grpo, drgrpo or rloo")
}

func addGroupSizeFlag(fs *flag.FlagSet, p *int) {
	fs.IntVar(p, "group-size", advantage.DefaultGroupSize, "completions per instance (G, the GRPO group)")
}

func addRewardTimeoutFlag(fs *flag.FlagSet, p *time.Duration) {
	fs.DurationVar(p, "reward-timeout", reward.DefaultTimeout, "longest scoring of one answer (a slower one counts as failed, reward −1; swerl train dead-letters it)")
}

func addMetricsFlag(fs *flag.FlagSet, p *string, def, why string) {
	fs.StringVar(p, "metrics-addr", def, deliberate(`serve Prometheus /metrics here ("": off)`, why))
}

func addProgressFlag(fs *flag.FlagSet, p *time.Duration) {
	fs.DurationVar(p, "progress-every", 2*time.Second, "at most one progress line this often")
}

func addEventsFlag(fs *flag.FlagSet, events flag.Value) {
	fs.Var(events, "events", "GH Archive hourly .json/.json.gz file or folder of them, local or gs:// / s3:// (repeatable)")
}

func addRelevantFilesFlag(fs *flag.FlagSet, p *int) {
	fs.IntVar(p, "relevant-files", 3, "relevant unmodified files added to the code context (imports either way, files named in the issue, same-package siblings; negative: none)")
}

func addMaxSeqFlag(fs *flag.FlagSet, p *int, def int, why string) {
	fs.IntVar(p, "max-seq", def, deliberate("longest prompt+completion in tokens (longer samples are skipped and counted)", why))
}

func addKeepFlag(fs *flag.FlagSet, p *int, def int, why string) {
	fs.IntVar(p, "keep-checkpoints", def, deliberate("keep the files of only the newest N versions and version 0; older ones are deleted, their index rows stay (0: keep all)", why))
}

func addLRFlag(fs *flag.FlagSet, p *float64, def float64, why string) {
	fs.Float64Var(p, "lr", def, deliberate("peak learning rate", why))
}

func addCompactPromptFlag(fs *flag.FlagSet, p *bool, def bool, why string) {
	fs.BoolVar(p, "compact-prompt", def, deliberate("use the short prompt template (small models) instead of the paper's full prompt", why))
}

func addEngineTimeoutFlag(fs *flag.FlagSet, p *time.Duration) {
	fs.DurationVar(p, "engine-timeout", weightsync.DefaultTimeout, "longest wait for one engine request of the weight push, its answer included; then it counts as failed and is retried, and the engine keeps the version it holds (raise it for the full weights of a large model)")
}

func addTopicFlags(fs *flag.FlagSet, prefix *string, partitions *int) {
	fs.StringVar(prefix, "topic-prefix", kafkaio.DefaultTopicPrefix, "prefix of swerl's topic names (instances, samples, weights, deadletter)")
	fs.IntVar(partitions, "partitions", 4, "partitions of the topics swerl creates")
}

func addDeviceFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "device", "cpu", "compute device: "+deviceNames())
}
