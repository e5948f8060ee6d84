package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"swerl/internal/atomicfile"
	"swerl/transforms/agentless"
)

func init() {
	register(&command{name: "agentless", summary: "Agentless Mini (SWE-RL's evaluation scaffold): `agentless check` runs conformance lines", run: runAgentless})
}

func runAgentless(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintf(stderr, "Usage: swerl agentless check --in FILE --out FILE\n")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return nil
		}
		return usagef("the only subcommand so far is check")
	}
	return runAgentlessCheck(ctx, args[1:], stderr)
}

// runAgentlessCheck reads conformance lines (their input fields) and writes
// one {"id","kind","result"} line each, in order.
func runAgentlessCheck(_ context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("agentless check", "--in FILE --out FILE", stderr)
	in := fs.String("in", "", "conformance lines (JSONL: id, kind and the kind's input fields)")
	out := fs.String("out", "", "where to write one {\"id\",\"kind\",\"result\"} line per input line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return usagef("--in and --out are required")
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	r, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer r.Close()
	if d := filepath.Dir(*out); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	w, err := atomicfile.Create(*out)
	if err != nil {
		return err
	}
	defer w.Abort()
	st, err := agentless.Check(r, w)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if err := w.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "swerl agentless check: %d apply, %d vote, %d normalize lines\n", st.Lines["apply"], st.Lines["vote"], st.Lines["normalize"])
	if n := st.Errors["normalize"]; n > 0 {
		fmt.Fprintf(stderr, "swerl agentless check: %d normalize lines null: Agentless Mini's normalize_patch raises on them\n", n)
	}
	if n := st.Unsupported["normalize"]; n > 0 {
		fmt.Fprintf(stderr, "swerl agentless check: %d normalize lines null: this normalizer cannot follow them\n", n)
	}
	return nil
}
