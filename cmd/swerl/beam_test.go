package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
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

// TestPathsShipAbsolute: paths given on the command line are made absolute
// before a job ships, since a remote runner's workers run in another
// directory; URLs, scp-like git remotes and non-file policies are left as
// they are.
func TestPathsShipAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for in, want := range map[string]string{
		"repo":                            filepath.Join(dir, "repo"),
		"./out/x":                         filepath.Join(dir, "out/x"),
		"../up":                           filepath.Join(filepath.Dir(dir), "up"),
		"/abs/p":                          "/abs/p",
		"":                                "",
		"https://github.com/o/r.git":      "https://github.com/o/r.git",
		"file:///srv/git/r.git":           "file:///srv/git/r.git",
		"ssh://git@host/o/r":              "ssh://git@host/o/r",
		"git@github.com:o/r.git":          "git@github.com:o/r.git",
		"gs://bucket/instances":           "gs://bucket/instances",
		"dir/with@at:colon/but/no/remote": filepath.Join(dir, "dir/with@at:colon/but/no/remote"),
	} {
		if got := absPath(in); got != want {
			t.Errorf("absPath(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"file:c.jsonl":             "file:" + filepath.Join(dir, "c.jsonl"),
		"file:/x/c.jsonl":          "file:/x/c.jsonl",
		"model:ckpt/v000003":       "model:" + filepath.Join(dir, "ckpt/v000003"),
		"http://127.0.0.1:8000/v1": "http://127.0.0.1:8000/v1",
		"file:":                    "file:",
	} {
		if got := absPolicy(in); got != want {
			t.Errorf("absPolicy(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWorkerBinaryDefaultsToSelf: without --worker_binary, a job names the
// running executable as the worker on linux/amd64 instead of compiling the
// source.
func TestWorkerBinaryDefaultsToSelf(t *testing.T) {
	f := flag.CommandLine.Lookup("worker_binary")
	old := f.Value.String()
	t.Cleanup(func() { flag.CommandLine.Set("worker_binary", old) })
	flag.CommandLine.Set("worker_binary", "")
	beamInit()
	exe, _ := os.Executable()
	want := ""
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		want = exe
	}
	if got := f.Value.String(); got != want {
		t.Errorf("worker_binary = %q, want %q", got, want)
	}
	flag.CommandLine.Set("worker_binary", "/opt/swerl-worker")
	beamInit()
	if got := f.Value.String(); got != "/opt/swerl-worker" {
		t.Errorf("an explicit --worker_binary became %q", got)
	}
}
