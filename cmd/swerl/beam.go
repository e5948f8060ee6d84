package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx" // registers every runner and its flags

	"swerl/internal/gitio"
)

// isBeamWorker reports whether a Beam runner (Flink, Dataflow, a portable
// job server) started this binary as an SDK worker: the container boot loader
// runs it as `swerl --worker=true --id=… --control_endpoint=…` with no
// subcommand.
func isBeamWorker(args []string) bool {
	for _, a := range args {
		if a == "--worker" || a == "-worker" || strings.HasPrefix(a, "--worker=") || strings.HasPrefix(a, "-worker=") {
			return true
		}
	}
	return false
}

// runBeamWorker parses the runner's flags and hands the process to Beam's
// worker harness, which exits the process when the worker is done.
func runBeamWorker(args []string) {
	flag.CommandLine.Parse(args)
	beam.Init()
}

// addBeamFlags makes the flags that Beam registers globally (--runner,
// --endpoint, --environment_type, --environment_config, Dataflow's --project,
// --region, --temp_location, …) flags of a pipeline subcommand. Setting one
// sets the global flag itself, so runners see it as set and forward it to
// remote workers as a pipeline option.
func addBeamFlags(fs *flag.FlagSet) {
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) != nil || beamInternalFlags[f.Name] {
			return
		}
		name := f.Name
		set := func(s string) error { return flag.CommandLine.Set(name, s) }
		usage := beamUsagePrefix + f.Usage
		if f.DefValue != "" {
			usage += " (default " + f.DefValue + ")"
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			fs.BoolFunc(name, usage, set)
		} else {
			fs.Func(name, usage, set)
		}
	})
}

// beamInternalFlags are the worker-mode flags set by runners, never by users.
var beamInternalFlags = map[string]bool{
	"worker": true, "id": true, "logging_endpoint": true, "control_endpoint": true,
	"semi_persist_dir": true, "options": true,
}

// beamInit prepares Beam before a pipeline is constructed by a subcommand.
// Unless --worker_binary is given, the running executable is the worker
// binary on linux/amd64 (what Flink's and Dataflow's Go containers run):
// the SDK would otherwise try to compile the source, which a released
// binary does not have ("go.mod file not found"). In-process runs
// (Prism's loopback workers) do not use it.
func beamInit() {
	if !flag.Parsed() {
		flag.CommandLine.Parse(nil)
	}
	if *jobopts.WorkerBinary == "" && runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		if exe, err := os.Executable(); err == nil {
			flag.CommandLine.Set("worker_binary", exe)
		}
	}
	beam.Init()
}

// absPath returns a local path made absolute against the working
// directory, so a pipeline that ships to a runner whose workers run in
// another directory (Flink, Dataflow, a job server's worker pool) names the
// same file. "", URLs and absolute paths are returned unchanged.
func absPath(p string) string {
	if p == "" || gitio.IsURL(p) || filepath.IsAbs(p) { // gitio.IsURL: any scheme://, git@host:path
		return p
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// absPaths is absPath of every element, in place.
func absPaths(ps []string) []string {
	for i := range ps {
		ps[i] = absPath(ps[i])
	}
	return ps
}

// absPolicy makes the path of a "file:PATH" or "model:DIR" policy spec
// absolute (absPath); other specs (http://…) are returned unchanged.
func absPolicy(spec string) string {
	for _, scheme := range []string{"file:", "model:"} {
		if p, ok := strings.CutPrefix(spec, scheme); ok && p != "" {
			return scheme + absPath(p)
		}
	}
	return spec
}

// quietRunner, unless verbose, sends the default logger (through which
// Prism logs every job step at INFO; beamInit sets it up) to stderr at WARN.
// Once ctx is done (Ctrl-C) it also drops the runner's errors about the
// bundles the cancellation cut short: the command reports the stop itself.
// The check is made as each record is logged, not by a callback after the
// cancellation, so an error the cancellation caused can never slip out
// ahead of it.
func quietRunner(ctx context.Context, stderr io.Writer, verbose bool) {
	if verbose {
		return
	}
	text := slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	slog.SetDefault(slog.New(untilDone{Handler: text, ctx: ctx}))
}

// untilDone is a slog.Handler that logs nothing once ctx is done.
type untilDone struct {
	slog.Handler
	ctx context.Context
}

func (h untilDone) Enabled(c context.Context, l slog.Level) bool {
	return h.ctx.Err() == nil && h.Handler.Enabled(c, l)
}

func (h untilDone) Handle(c context.Context, r slog.Record) error {
	if h.ctx.Err() != nil {
		return nil
	}
	return h.Handler.Handle(c, r)
}

func (h untilDone) WithAttrs(as []slog.Attr) slog.Handler {
	return untilDone{Handler: h.Handler.WithAttrs(as), ctx: h.ctx}
}

func (h untilDone) WithGroup(name string) slog.Handler {
	return untilDone{Handler: h.Handler.WithGroup(name), ctx: h.ctx}
}
