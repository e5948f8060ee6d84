// Command swerl is the single binary of swerl: reinforcement learning for
// code LLMs on real software evolution (SWE-RL) as a streaming dataflow.
//
// Every subcommand lives in its own file in this package and registers
// itself in an init function; flags are parsed here and nowhere else, then
// turned into the Config structs of the library packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
)

// command is one swerl subcommand.
type command struct {
	name    string
	summary string // one line for the command list
	// run parses args (everything after the subcommand name) and runs.
	// It returns flag.ErrHelp after printing usage for -h.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]*command{}

// register adds a subcommand; called from init functions.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("swerl: duplicate command " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "swerl: reinforcement learning for code LLMs on real software evolution (SWE-RL).\n\n")
	fmt.Fprintf(w, "Usage:\n  swerl <command> [flags]\n  swerl <command> -h    (flags of one command)\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() {
	if isBeamWorker(os.Args[1:]) {
		runBeamWorker(os.Args[1:])
		return
	}
	stopProfile := startCPUProfile(os.Getenv(cpuProfileEnv), os.Stderr)
	code := runInterruptible(os.Args[1:], os.Stdout, os.Stderr, shutdownGrace)
	stopProfile()
	os.Exit(code)
}

// shutdownGrace is how long a command may take to stop after SIGINT or
// SIGTERM before the process exits anyway.
const shutdownGrace = 10 * time.Second

// runInterruptible runs runMain with a context that the first SIGINT
// (Ctrl-C) or SIGTERM cancels: every command then stops cleanly within a
// few seconds (what it published stays, --resume goes on from there), and
// exits 0. Should it still run grace after the signal, the process exits
// with status 1; a second signal ends it at once (the default action). A
// command stopped either way leaves what a SIGKILL leaves, which --resume
// handles.
func runInterruptible(args []string, stdout, stderr io.Writer, grace time.Duration) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		stop() // a second signal: the default action
		select {
		case <-time.After(grace):
			fmt.Fprintf(stderr, "swerl: still running %s after the interrupt; exiting\n", grace)
			os.Exit(1)
		case <-finished:
		}
	}()
	return runMain(ctx, args, stdout, stderr)
}

// runMain dispatches to a subcommand and returns the process exit code:
// 0 on success, 1 on a runtime error, 2 on a usage error.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "swerl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	applyEnv()
	err := flagHint(c.run(ctx, args[1:], stdout, stderr))
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "swerl %s: %v\n", c.name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "swerl %s: %v\n", c.name, err)
		return 1
	}
}

// flagHint adds to a library's error the flags that address its
// condition: the libraries describe the condition, the CLI knows its
// flags.
func flagHint(err error) error {
	switch {
	case errors.Is(err, learner.ErrPublished):
		return fmt.Errorf("%w (pass --resume to continue, or choose another --out)", err)
	case errors.Is(err, modeldir.ErrNoLocalBase):
		return fmt.Errorf("%w (swerl model merge --base DIR)", err)
	}
	return err
}

// usageError marks a bad flag or argument (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// newFlagsHook, when set (by tests), sees every FlagSet newFlags makes.
var newFlagsHook func(*flag.FlagSet)

// newFlags returns a FlagSet for a subcommand that writes its usage to stderr
// and returns errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("swerl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if newFlagsHook != nil {
		newFlagsHook(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swerl %s %s\n\n", name, synopsis)
		printFlags(stderr, fs)
	}
	return fs
}

// parseFlags parses args and maps parse failures to usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	return nil
}

// parseNoArgs is parseFlags for a command that takes flags only: an
// argument left after them is a usage error.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	return nil
}

// startCPUProfile writes a CPU profile of the whole command to path when
// path is set (the SWERL_CPUPROFILE environment variable, so every command
// can be profiled without a flag of its own); it returns the function that
// stops it. A profile that cannot be started is reported, not fatal.
func startCPUProfile(path string, stderr io.Writer) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "swerl: SWERL_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(stderr, "swerl: SWERL_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "swerl: SWERL_CPUPROFILE: %v\n", err)
		}
	}
}
