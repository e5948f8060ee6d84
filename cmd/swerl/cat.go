package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"

	"swerl/sinks/parquetio"
)

func init() {
	register(&command{name: "cat", summary: "print Parquet files swerl wrote as JSONL, one row a line", run: runCat})
}

func runCat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cat", "FILE.parquet|DIR [...]", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("name at least one Parquet file or directory")
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, arg := range fs.Args() {
		files := []string{arg}
		if dirFiles, err := parquetio.Files(arg); err == nil && dirFiles != nil {
			files = dirFiles
		}
		for _, f := range files {
			if err := parquetio.ScanAny(f, func(row map[string]any) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				return enc.Encode(row)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}
