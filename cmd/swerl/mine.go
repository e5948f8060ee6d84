package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"swerl/internal/gcpace"
	"swerl/pipelines/mine"
	"swerl/sinks/files"
	"swerl/sinks/kafkaio"
	"swerl/sinks/metrics"
)

func init() {
	register(&command{name: "mine", summary: "mine merged pull requests (and commits) from git history and GH Archive events into instances", run: runMine})
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// mineMemoryFloor is the memory limit below which swerl mine collects at
// GOGC=200: less collection CPU for a small rise in peak memory
// (bench/mine/README.md, "Choices in the code").
const mineMemoryFloor = 256 << 20

func runMine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mine", "[--repo PATH]… [--events PATH]… [--out DIR] [flags]", stderr)
	var repos, events, refs listFlag
	fs.Var(&repos, "repo", "git repository to mine: a local path (bare or not) or a URL (https://, ssh://, file://, git@host:owner/repo), cloned into DIR/.clones for the run (repeatable; default: the current directory)")
	reposFile := fs.String("repos", "", "file of repositories to mine, one path or URL a line (blank lines and lines starting with # skipped; the file may be gs:// or s3://); a URL that cannot be cloned is a dead letter; with several repositories, stderr gets a line as each finishes: PRs, instances (before deduplication), dead letters, seconds")
	addEventsFlag(fs, &events)
	fs.Var(&refs, "refs", "also mine what these refs reach besides HEAD: a branch, tag or commit, or a pattern such as 'refs/heads/*' (repeatable); every merged PR reachable is found, whichever branch it was merged into")
	out := fs.String("out", "swerl-out", "output directory, local or gs://bucket/… / s3://bucket/…: instances in DIR/instances/*.parquet, dead letters in DIR/deadletter/")
	commits := fs.Bool("commits", false, "also mine every non-merge commit on the first-parent line of HEAD (and --refs) that is not a PR (id owner/repo@<sha12>, problem statement = message)")
	maxFiles := fs.Int("max-files", 50, "drop changes touching more files (negative: no cap)")
	maxLines := fs.Int("max-lines", 5000, "drop changes with more added+deleted lines (negative: no cap)")
	maxBytes := fs.Int("max-bytes", 2<<20, "drop changes whose files before+after exceed this many bytes (negative: no cap)")
	relFiles := new(int)
	addRelevantFilesFlag(fs, relFiles)
	relBytes := fs.Int("relevant-bytes", 64<<10, "skip relevant-file candidates larger than this")
	exclude := fs.String("exclude", "", "decontamination file: one owner/repo, owner/repo#N or owner/repo@sha12 a line")
	swebench := fs.Bool("exclude-swebench", true, "exclude SWE-bench's twelve repositories (as SWE-RL does)")
	jsonl := fs.String("jsonl", "", "also write the instances as JSON lines to this file")
	rowsPerFile := fs.Int("rows-per-file", mine.DefaultRowsPerFile, "most instances in one Parquet file")
	workers := fs.Int("build-workers", envDefault("SWERL_MINE_WORKERS"), "goroutines of each worker that read the candidates' files, sharing git cat-file processes (0: 4 a core; default from SWERL_MINE_WORKERS)")
	kf := addKafkaFlags(fs)
	fs.Lookup("brokers").Usage = "also publish the instances to the Kafka topic <prefix>instances on these brokers host:port,… (none: no Kafka)"
	metricsAddr := new(string)
	addMetricsFlag(fs, metricsAddr, "127.0.0.1:0", "")
	every := new(time.Duration)
	addProgressFlag(fs, every)
	verbose := fs.Bool("v", false, "also log the Beam runner's own progress")
	addBeamFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *reposFile != "" {
		more, err := readRepoList(ctx, *reposFile)
		if err != nil {
			return err
		}
		repos = append(repos, more...)
	}
	if *maxFiles == 0 || *maxLines == 0 || *maxBytes == 0 || *relBytes == 0 || *relFiles == 0 || *rowsPerFile < 1 {
		return usagef("--max-files, --max-lines, --max-bytes, --relevant-files and --relevant-bytes must not be 0 (negative disables); --rows-per-file ≥ 1")
	}
	// Paths travel with the job to workers that may run elsewhere.
	cfg := mine.Config{
		Repos: absPaths(repos), Events: absPaths(events), Refs: refs, Out: absPath(*out), Commits: *commits,
		MaxFiles: *maxFiles, MaxLines: *maxLines, MaxBytes: *maxBytes,
		RelevantFiles: *relFiles, RelevantBytes: *relBytes,
		Exclude: absPath(*exclude), ExcludeSWEBench: *swebench,
		JSONL: *jsonl != "", JSONLPath: absPath(*jsonl), RowsPerFile: *rowsPerFile, Workers: *workers,
		Progress: stderr, ProgressEvery: *every,
	}
	// Unlike the streaming commands, mine publishes only when asked: with
	// --brokers, instances also go to the instances topic.
	if kf.brokers != "" {
		kc, stop, err := kf.connect(ctx, stderr)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Publish = mine.PublishKafka(kafkaio.WriteConfig{Config: kc, Topic: kc.Topic(kafkaio.Instances)})
	}
	srv, err := metrics.Serve(*metricsAddr)
	if err != nil {
		return err
	}
	if srv != nil {
		fmt.Fprintf(stderr, "metrics on http://%s/metrics\n", srv.Addr)
		defer srv.Close()
	}
	beamInit()
	quietRunner(ctx, stderr, *verbose)
	// Mining allocates hundreds of MiB in passing over a small live heap:
	// collect less often, within max(256 MiB, 2×live) (package gcpace; GOGC
	// or GOMEMLIMIT in the environment turn this off).
	defer gcpace.Start(200, mineMemoryFloor).Stop()
	sum, err := mine.Run(ctx, cfg)
	if err != nil && ctx.Err() != nil {
		// An interrupt is a clean stop (exit 0, as every command's): say
		// what it stopped and what is left, in place of the runner's errors.
		fmt.Fprintf(stderr, "swerl mine: interrupted while mining; %s is not complete (no %s, so swerl run --resume mines again), "+
			"run the same command again to mine from the start\n", files.Join(cfg.Out, "instances"), mine.DoneFile)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, sum.String())
	return nil
}

// readRepoList reads a --repos file: one repository path or URL a line;
// blank lines and lines starting with "#" are skipped. A relative path is
// relative to the working directory, as on the command line.
func readRepoList(ctx context.Context, path string) ([]string, error) {
	b, err := files.ReadFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("mine: --repos: %w", err)
	}
	var out []string
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.ContainsAny(l, " \t") || strings.HasPrefix(l, "-") {
			return nil, fmt.Errorf("mine: --repos: %s:%d: want one path or URL, got %q", path, i+1, l)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mine: --repos: %s names no repository", path)
	}
	return out, nil
}

// envDefault reads a non-negative integer from environment variable name, 0
// when it is unset or not one: a flag's default that an older environment
// variable still sets.
func envDefault(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
