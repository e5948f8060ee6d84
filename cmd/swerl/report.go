package main

import (
	"context"
	"fmt"
	"io"

	"swerl/sinks/report"
)

func init() {
	register(&command{name: "report", summary: "write an HTML report with plots from a run's Parquet outputs, and a page per trained version", run: runReport})
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", "[--out DIR]", stderr)
	out := fs.String("out", "swerl-out", "the run's output directory (instances/, samples/, index.parquet, trained/); the report goes to DIR/report/ (versions/ holds a page per trained version)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	page, err := report.Write(*out)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, page)
	return nil
}
