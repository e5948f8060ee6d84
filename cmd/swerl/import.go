package main

import (
	"context"
	"fmt"
	"io"

	"swerl/pipelines/mine"
)

func init() {
	register(&command{name: "import", summary: "import SWE-bench-format rows as instances (swerl import swebench FILE --repo PATH)", run: runImport})
}

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", "swebench FILE.jsonl|FILE.parquet --repo PATH [--out DIR]", stderr)
	repo := fs.String("repo", "", "local clone of the rows' repository (holds every base_commit)")
	out := fs.String("out", "swerl-out", "output directory, local or gs:// / s3://: instances in DIR/instances/swebench.parquet")
	relFiles := new(int)
	addRelevantFilesFlag(fs, relFiles)
	relBytes := fs.Int("relevant-bytes", 64<<10, "skip relevant-file candidates larger than this")
	// Flags may follow the positional arguments: parse the rest again.
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		return parseFlags(fs, append([]string{"-h"}, args...))
	}
	if args[0] != "swebench" {
		return usagef("unknown format %q (want: swebench)", args[0])
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) > 0 {
		file := rest[0]
		if err := parseFlags(fs, rest[1:]); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return usagef("unexpected arguments %q", fs.Args())
		}
		rest = []string{file}
	}
	if len(rest) != 1 || *repo == "" {
		return usagef("want: swerl import swebench FILE.jsonl|FILE.parquet --repo PATH")
	}
	if *relFiles == 0 || *relBytes == 0 {
		return usagef("--relevant-files and --relevant-bytes must not be 0 (negative disables)")
	}
	sum, err := mine.ImportSWEBench(ctx, mine.ImportConfig{File: rest[0], Repo: *repo, Out: *out, RelevantFiles: *relFiles, RelevantBytes: *relBytes})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, sum.String())
	return nil
}
