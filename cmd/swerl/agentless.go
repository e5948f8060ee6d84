package main

import (
	"context"
	"io"
	"os"

	"swerl/transforms/agentless"
)

func init() {
	register(&command{name: "agentless", summary: "Agentless Mini: check conformance lines (swerl agentless check --in FILE --out FILE)", run: runAgentless})
}

func runAgentless(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fs := newFlags("agentless", "check --in FILE --out FILE", stderr)
		return parseFlags(fs, []string{"-h"})
	}
	if args[0] != "check" {
		return usagef("unknown agentless subcommand %q (want: check)", args[0])
	}
	return runAgentlessCheck(args[1:], stdout, stderr)
}

// runAgentlessCheck reads conformance lines (kind normalize, apply or
// vote, input fields only) and writes one {"id","kind","result"} line
// each, in order.
func runAgentlessCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agentless check", "--in FILE --out FILE", stderr)
	in := fs.String("in", "", "conformance lines, JSONL (- for stdin)")
	out := fs.String("out", "", "results, JSONL (- for stdout)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		return usagef("want: swerl agentless check --in FILE --out FILE")
	}
	var r io.Reader = os.Stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	if *out == "-" {
		return agentless.Check(r, stdout, agentless.DefaultEngine())
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	cerr := agentless.Check(r, f, agentless.DefaultEngine())
	if err := f.Close(); err != nil && cerr == nil {
		cerr = err
	}
	return cerr
}
