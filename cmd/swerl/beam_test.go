package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestIsBeamWorker(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--worker=true", "--id=1"}, true},
		{[]string{"--id=1", "-worker"}, true},
		{[]string{"mine", "--repo", "."}, false},
		{[]string{"train", "--workers=4"}, false},
	} {
		if got := isBeamWorker(tc.args); got != tc.want {
			t.Errorf("isBeamWorker(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestBeamFlagsReachTheGlobalFlags(t *testing.T) {
	fs := newFlags("x", "", io.Discard)
	addBeamFlags(fs)
	for _, name := range []string{"runner", "endpoint", "environment_type", "environment_config", "project", "region", "temp_location"} {
		if fs.Lookup(name) == nil {
			t.Errorf("pipeline subcommands lack Beam's --%s", name)
		}
	}
	if fs.Lookup("worker") != nil {
		t.Error("the runner-internal --worker flag must not be offered to users")
	}
	// The Beam flags are process globals: put --endpoint back, or every later
	// pipeline test in this binary dials a job server that is not there.
	t.Cleanup(func() { flag.CommandLine.Set("endpoint", "") })
	if err := parseFlags(fs, []string{"--endpoint", "localhost:8099"}); err != nil {
		t.Fatal(err)
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || (f.Name == "endpoint" && f.Value.String() == "localhost:8099") })
	if !set {
		t.Fatal("--endpoint given to the subcommand is not set on Beam's global flag")
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "Beam: ") {
		t.Fatal("Beam flags are not labelled in --help")
	}
}
