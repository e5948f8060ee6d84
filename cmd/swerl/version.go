package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	register(&command{name: "version", summary: "print the build's version and Go toolchain", run: runVersion})
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := "(devel)"
	goV := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		goV = bi.GoVersion
	}
	fmt.Fprintf(stdout, "swerl %s %s\n", v, goV)
	return nil
}
