package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/gpu/learner"
	"swerl/internal/atomicfile"
	"swerl/internal/engineapi"
	"swerl/internal/gitio/gittest"
	"swerl/internal/testenv"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
	"swerl/sinks/parquetio"
	"swerl/transforms/agentless"
)

// A full-disk case is one command that writes under --out: its inputs,
// its command line, how it goes on after a failure, and what a finished
// output holds that must not depend on having been interrupted.
type fullDiskCase struct {
	name string
	// setup makes the inputs under dir and returns the command line
	// writing to out.
	setup func(t *testing.T, dir string) func(out string) []string
	// resume is the flag that continues a stopped run ("": running the
	// same command again is how it goes on).
	resume string
	// prepare, when set, fills out with the command's inputs first
	// (swerl report writes into the run it reads), from the same dir.
	prepare func(t *testing.T, dir, out string)
	// output is the part of out the command writes ("": all of it);
	// the disk is left room for each fraction of it in rooms, one run
	// each (none: half).
	output string
	rooms  []float64
	// result digests a finished output: equal digests are the same
	// result (rows, versions, contents where deterministic).
	result func(t *testing.T, out string) string
}

// TestFullDisk runs each command that writes with --out on a tmpfs with
// room for part of what it writes (each case's fractions, from the first
// file to the last): it fails (exit 1, no panic) with
// an error naming the file under --out and the full disk; nothing under
// --out is half-written and read back as valid (every Parquet file reads
// to its end, every indexed checkpoint verifies, every JSON file and line
// parses); once the tmpfs is grown, the command's resume (--resume or the
// same command again) ends with the result of a run on a roomy disk.
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl commands in child processes")
	}
	for _, c := range fullDiskCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			args := c.setup(t, dir)
			ref := filepath.Join(dir, "ref")
			if c.prepare != nil {
				c.prepare(t, dir, ref)
			}
			runCLI(t, args(ref), 0, 3*time.Minute)
			want := c.result(t, ref)
			written := diskBytes(t, filepath.Join(ref, c.output))
			t.Logf("on a roomy disk it writes %d KiB", written>>10)

			rooms := c.rooms
			if rooms == nil {
				rooms = []float64{0.5}
			}
			for _, room := range rooms {
				t.Run(fmt.Sprintf("room-%.2f", room), func(t *testing.T) {
					disk := smallDisk(t, "64m")
					out := filepath.Join(disk, "out")
					if c.prepare != nil {
						c.prepare(t, dir, out)
					}
					shrink(t, disk, int64(float64(written)*room))
					ch := startCLI(t, args(out)...)
					<-ch.done
					log := ch.out.String()
					checkFullDiskError(t, c.name, ch, out, log)
					checkNothingHalfWritten(t, out)
					if tmp := tempFiles(t, out); len(tmp) > 0 {
						t.Errorf("the failed write left temporary files, taking the space a resume needs: %v", tmp)
					}

					grow(t, disk)
					rerun := args(out)
					if c.resume != "" {
						rerun = append(rerun, c.resume)
					}
					_, log = runCLI(t, rerun, 0, 3*time.Minute)
					if got := c.result(t, out); got != want {
						t.Fatalf("resumed after the full disk:\n%s\nwant (a run on a roomy disk):\n%s\nlog:\n%s", got, want, log)
					}
				})
			}
		})
	}
}

var fullDiskCases = []fullDiskCase{
	// From the first version's write to the last one's; with room for
	// all it writes, the index's new copy does not fit beside the old
	// one: the last checkpoint is in place but not indexed.
	{name: "learn", resume: "--resume", setup: learnSetup, result: learnResult, rooms: []float64{0.02, 0.5, 0.9, 0.99, 1}},
	{name: "sft", resume: "--resume", setup: sftSetup, result: learnResult, rooms: []float64{0.1, 0.6, 1}},
	// A samples file, then (room for the samples) a positions file.
	{name: "train", setup: trainSetup, result: trainResult, rooms: []float64{0.2, 0.9, 1}},
	// Room for the first file of 10,000 rows, not the second.
	{name: "replay", setup: replaySetup, result: replayResult, rooms: []float64{0.92}},
	// Room for a part of instances.jsonl, and for all but predictions.jsonl.
	{name: "agentless", setup: agentlessSetup, result: agentlessResult, rooms: []float64{0.3, 0.6}},
	{name: "report", setup: reportSetup, prepare: reportInput, output: "report", result: reportResult},
}

// checkFullDiskError checks how a command stopped by a full disk ends:
// exit status 1, no panic, and a last line "swerl NAME: …" naming a path
// under out and the full disk.
func checkFullDiskError(t *testing.T, name string, c *cli, out, log string) {
	t.Helper()
	if c.err == nil {
		t.Fatalf("swerl %s on a full disk exited 0:\n%s", name, log)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("swerl %s on a full disk: exit %d, want 1", name, code)
	}
	if strings.Contains(log, "panic:") || strings.Contains(log, "goroutine ") {
		t.Fatalf("swerl %s panicked on a full disk:\n%s", name, log)
	}
	var last string
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if strings.HasPrefix(l, "swerl "+name+": ") {
			last = l
		}
	}
	if !strings.Contains(last, "no space left on device") || !strings.Contains(last, out) {
		t.Fatalf("swerl %s on a full disk: last line %q; want one naming the file under %s and the full disk:\n%s", name, last, out, log)
	}
	t.Logf("on the full disk: %s", last)
}

// checkNothingHalfWritten checks that what a stopped command left under
// out reads as complete or is a temporary file no reader takes: every
// Parquet file reads to its end (swerl cat), every JSON file and JSONL
// line outside the checkpoints parses, and every version of index.parquet
// whose checkpoint is there verifies against the index's hashes.
func checkNothingHalfWritten(t *testing.T, out string) {
	t.Helper()
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// Temporary folders (a checkpoint being written) are never
			// read; published checkpoints are checked by their hashes.
			if p != out && (strings.HasPrefix(name, ".") || name == "checkpoints") {
				return filepath.SkipDir
			}
			return nil
		}
		if atomicfile.IsTemp(name) || parquetio.IsTemp(name) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(name, ".parquet"):
			var se bytes.Buffer
			if code := runMain(context.Background(), []string{"cat", p}, io.Discard, &se); code != 0 {
				t.Errorf("%s does not read to its end: %s", p, se.String())
			}
		case strings.HasSuffix(name, ".jsonl"):
			for i, l := range bytes.Split(b, []byte("\n")) {
				if len(l) > 0 && !json.Valid(l) {
					t.Errorf("%s:%d is not a complete JSON line: %.80q", p, i+1, l)
				}
			}
			if len(b) > 0 && b[len(b)-1] != '\n' {
				t.Errorf("%s ends in a partial line", p)
			}
		case strings.HasSuffix(name, ".json"):
			if !json.Valid(b) {
				t.Errorf("%s is not complete JSON: %.80q", p, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "index.parquet")); err != nil {
		return
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Versions()
	if err != nil {
		t.Fatalf("index.parquet after the full disk: %v", err)
	}
	for _, r := range rows {
		if _, err := os.Stat(st.Path(r.Version)); err != nil {
			continue
		}
		if err := st.Verify(r); err != nil {
			t.Errorf("indexed v%d does not verify: %v", r.Version, err)
		}
	}
}

// tempFiles lists the temporary files and folders under out (hidden
// names with ".tmp-", as atomicfile, parquetio and checkpoint make them).
func tempFiles(t *testing.T, out string) []string {
	t.Helper()
	var tmp []string
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); strings.HasPrefix(n, ".") && strings.Contains(n, "tmp") {
			tmp = append(tmp, p)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tmp
}

// diskBytes is what the files under dir take on a tmpfs (whole pages).
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += (fi.Size() + 4095) &^ 4095
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// shrink resizes the tmpfs at disk to what it holds now and room more
// bytes, at least two pages.
func shrink(t *testing.T, disk string, room int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(disk, &st); err != nil {
		t.Fatal(err)
	}
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	remount(t, disk, strconv.FormatInt(used+max(room, 8192), 10))
}

// grow frees space on the tmpfs at disk: 256 MiB.
func grow(t *testing.T, disk string) { remount(t, disk, "256m") }

func remount(t *testing.T, disk, size string) {
	t.Helper()
	if b, err := exec.Command("mount", "-o", "remount,size="+size, disk).CombinedOutput(); err != nil {
		t.Fatalf("resizing the tmpfs to %s: %v: %s", size, err, b)
	}
}

// fileSHA is the sha256 of a file, or "absent".
func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// learnSetup: 18 groups of 2 samples and the tiny model; learn trains 3
// groups a step, 6 steps in all.
func learnSetup(t *testing.T, dir string) func(out string) []string {
	samples := filepath.Join(dir, "samples")
	writeSamples(t, samples, mrand.New(mrand.NewPCG(46, 3)), 18, 2)
	model := tinyModel(t, dir)
	return func(out string) []string {
		return []string{"learn", "--model", model, "--samples", samples, "--out", out, "--batch-groups", "3",
			"--max-staleness", "-1", "--max-seq", "64", "--lr", "1e-3", "--metrics-addr", "", "--progress-every", "1m"}
	}
}

// sftSetup: 8 pairs and the tiny model; 6 steps of 2 examples.
func sftSetup(t *testing.T, dir string) func(out string) []string {
	pairs := filepath.Join(dir, "pairs.jsonl")
	var b strings.Builder
	for i := range 8 {
		fmt.Fprintf(&b, `{"id":"p%d","prompt":"say %d","answer":"the answer is %d"}`+"\n", i, i, i*7)
	}
	if err := os.WriteFile(pairs, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	model := tinyModel(t, dir)
	return func(out string) []string {
		return []string{"sft", "--model", model, "--pairs", pairs, "--out", out, "--steps", "6", "--batch", "2",
			"--max-seq", "64", "--lr", "1e-3", "--metrics-addr", "", "--progress-every", "1m"}
	}
}

// learnResult digests a learner's output: each indexed version's step,
// parent, loss, sample count and file hashes (weights and optimizer
// state), and the samples its record trained; the index must be
// contiguous from v0.
func learnResult(t *testing.T, out string) string {
	t.Helper()
	rows, err := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, r := range rows {
		if r.Version != int64(i) {
			t.Fatalf("index row %d is v%d: not contiguous", i, r.Version)
		}
		fmt.Fprintf(&b, "v%d step %d parent %d loss %v samples %d\n", r.Version, r.Step, r.Parent, r.Loss, r.Samples)
		for _, f := range r.Files {
			fmt.Fprintf(&b, "  %s %s\n", f.Path, f.SHA256)
		}
		if r.Version == 0 {
			continue
		}
		rec, err := learner.ReadRecord(out, r.Version)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  trained %v\n", rec.Samples)
	}
	return b.String()
}

// trainSetup: 40 instances of 4 recorded completions each, through the
// embedded broker.
func trainSetup(t *testing.T, dir string) func(out string) []string {
	set := traintest.New(t, dir, 40, 4, map[int]string{7: "not an instance"})
	return func(out string) []string {
		return []string{"train", "--instances", set.InstancesPath, "--policy", "file:" + set.CompletionsPath,
			"--group-size", "4", "--out", out, "--metrics-addr", "", "--progress-every", "1m"}
	}
}

// trainResult digests swerl train's output: every sample once (id,
// completion, reward, advantage) and the dead-letters' sources.
func trainResult(t *testing.T, out string) string {
	t.Helper()
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	seen := map[string]bool{}
	for _, s := range samples {
		if seen[s.ID] {
			t.Fatalf("sample %s written twice", s.ID)
		}
		seen[s.ID] = true
		lines = append(lines, fmt.Sprintf("%s %x %v %v", s.ID, sha256.Sum256([]byte(s.Completion)), s.Reward, s.Advantage))
	}
	dls, err := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	if err != nil {
		t.Fatal(err)
	}
	dead := map[string]bool{}
	for _, d := range dls {
		dead[d.Stage+" "+d.Source] = true
	}
	for d := range dead {
		lines = append(lines, "dead-letter "+d)
	}
	slices.Sort(lines)
	return fmt.Sprintf("%d samples\n%s", len(samples), strings.Join(lines, "\n"))
}

// replaySetup: 12,000 samples on a broker of the test process, with
// completions of 300 random bytes (hex), so that the replay writes a full
// file of 10,000 rows and a second one.
func replaySetup(t *testing.T, dir string) func(out string) []string {
	b := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: 2})
	c := b.Config("")
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: c, Topic: c.Topic(kafkaio.Samples), BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var msgs []kafka.Message
	noise := make([]byte, 300)
	for i := range 12000 {
		rand.Read(noise)
		s := schemas.Sample{Rollout: schemas.Rollout{ID: fmt.Sprintf("g%d/%d", i/4, i%4), InstanceID: fmt.Sprintf("i%d", i/4), GroupID: fmt.Sprintf("g%d", i/4),
			GroupSize: 4, Index: i % 4, Completion: hex.EncodeToString(noise)}, Reward: float64(i%3) - 1}
		v, err := kafkaio.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(s.GroupID), Value: v})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	return func(out string) []string {
		return []string{"replay", "--brokers", c.Brokers[0], "--topic", "samples", "--out", out}
	}
}

// replayResult digests a replay's output: every record once, by its
// position, with its completion.
func replayResult(t *testing.T, out string) string {
	t.Helper()
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	seen := map[string]bool{}
	for _, s := range samples {
		if seen[s.Source] {
			t.Fatalf("record %s replayed twice", s.Source)
		}
		seen[s.Source] = true
		lines = append(lines, fmt.Sprintf("%s %s %x", s.Source, s.ID, sha256.Sum256([]byte(s.Completion))))
	}
	slices.Sort(lines)
	return fmt.Sprintf("%d rows, digest %x", len(lines), sha256.Sum256([]byte(strings.Join(lines, "\n"))))
}

// agentlessSetup: 40 SWE-bench rows on a one-file repository, answered
// from a file of recorded completions: each names the file (localization)
// and edits it (repair), two of the three the same way, so that every row
// has candidates, a vote and a patch.
func agentlessSetup(t *testing.T, dir string) func(out string) []string {
	testenv.Tool(t, "git", "apt-get install git")
	g := gittest.New(t)
	g.Write(map[string]string{"util.py": "def f():\n    return 1\n\n\ndef g():\n    return f() + 1\n"})
	g.Git("add", ".")
	g.Git("commit", "-qm", "base")
	base := g.Git("rev-parse", "HEAD")
	rows, answers := filepath.Join(dir, "rows.jsonl"), filepath.Join(dir, "answers.jsonl")
	var rb, ab strings.Builder
	edit := func(n int) string {
		return fmt.Sprintf("util.py\n\n```python\n### util.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return %d\n>>>>>>> REPLACE\n```\n", n)
	}
	for i := 1; i <= 40; i++ {
		id := fmt.Sprintf("demo__demo-%d", i)
		fmt.Fprintf(&rb, `{"instance_id":"%s","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":"f should return %d"}`+"\n", id, base, i)
		line, err := json.Marshal(map[string]any{"instance_id": id, "completions": []string{edit(i), edit(i + 100), edit(i)}})
		if err != nil {
			t.Fatal(err)
		}
		ab.Write(append(line, '\n'))
	}
	for path, body := range map[string]string{rows: rb.String(), answers: ab.String()} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return func(out string) []string {
		return []string{"agentless", "--instances", rows, "--repo", g.Dir, "--policy", "file:" + answers, "--out", out,
			"--localize-samples", "2", "--repair-samples", "3", "--seed", "5"}
	}
}

// agentlessResult digests swerl agentless's output: the predictions'
// bytes and every candidate.
func agentlessResult(t *testing.T, out string) string {
	t.Helper()
	cands, err := parquetio.ReadFile[agentless.Candidate](filepath.Join(out, "candidates.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) == 0 {
		t.Fatalf("no candidates under %s: the recorded answers no longer apply, and the comparison would hold of empty outputs", out)
	}
	var lines []string
	for _, c := range cands {
		lines = append(lines, fmt.Sprintf("%s/%d %x %v %s", c.InstanceID, c.Sample, sha256.Sum256([]byte(c.RawPatch)), c.Chosen, c.Dropped))
	}
	slices.Sort(lines)
	preds, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	patched := 0
	for _, l := range strings.Split(strings.TrimSpace(string(preds)), "\n") {
		var p agentless.Prediction
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("predictions.jsonl: %v", err)
		}
		if p.ModelPatch != "" {
			patched++
		}
	}
	return fmt.Sprintf("%d predictions with a patch, sha256 %x\n%d candidates, digest %x", patched, sha256.Sum256(preds), len(cands),
		sha256.Sum256([]byte(strings.Join(lines, "\n"))))
}

// reportSetup: a learner's output root with its samples beside it, the
// run swerl report reads (reportInput copies it to --out).
func reportSetup(t *testing.T, dir string) func(out string) []string {
	root := filepath.Join(dir, "run")
	writeSamples(t, filepath.Join(root, "samples"), mrand.New(mrand.NewPCG(46, 4)), 12, 2)
	model := tinyModel(t, dir)
	runCLI(t, []string{"learn", "--model", model, "--samples", filepath.Join(root, "samples"), "--out", root, "--batch-groups", "3",
		"--max-staleness", "-1", "--max-seq", "64", "--lr", "1e-3", "--metrics-addr", "", "--progress-every", "1m"}, 0, 3*time.Minute)
	return func(out string) []string { return []string{"report", "--out", out} }
}

// reportInput copies reportSetup's run to out.
func reportInput(t *testing.T, dir, out string) {
	t.Helper()
	if b, err := exec.Command("cp", "-a", filepath.Join(dir, "run"), out).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, b)
	}
}

var generatedAt = regexp.MustCompile(`generated \d{4}-\d\d-\d\dT[0-9:.]+Z`)

// reportResult digests the report: its files and their bytes.
func reportResult(t *testing.T, out string) string {
	t.Helper()
	var b strings.Builder
	dir := filepath.Join(out, "report")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		page, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// The pages name the run's folder and the time they were made.
		page = bytes.ReplaceAll(page, []byte(out), []byte("OUT"))
		page = generatedAt.ReplaceAll(page, []byte("generated TIME"))
		fmt.Fprintf(&b, "%s %x\n", rel, sha256.Sum256(page))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// swerl serve on a learner's output root while the learner runs out of
// disk: it serves the newest version that verifies, never one half
// written, through failed learner runs on the full disk, and once space is
// freed and the learner resumed it reloads the final version.
func TestServeReloadOnAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl learn in child processes")
	}
	dir := t.TempDir()
	args := learnSetup(t, dir)
	disk := smallDisk(t, "64m")
	out := filepath.Join(disk, "out")
	shrink(t, disk, 3<<20) // v0 and one or two steps of the 6
	c := startCLI(t, args(out)...)
	<-c.done
	checkFullDiskError(t, "learn", c, out, c.out.String())
	st, err := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	good, err := st.LatestGood()
	if err != nil {
		t.Fatal(err)
	}
	addr, serveLog, stop := startServe(t, out, "--poll", "50ms", "--metrics-addr", "")
	defer stop()
	version := func() int64 {
		resp, err := http.Get("http://" + addr + engineapi.HealthPath)
		if err != nil {
			return -2
		}
		resp.Body.Close()
		v, err := strconv.ParseInt(resp.Header.Get(engineapi.VersionHeader), 10, 64)
		if err != nil {
			return -2
		}
		return v
	}
	if v := version(); v != good.Version {
		t.Fatalf("serve started on v%d, want the newest good v%d", v, good.Version)
	}
	// The learner resumed on the still full disk fails again while serve
	// polls the root.
	c = startCLI(t, append(args(out), "--resume")...)
	<-c.done
	checkFullDiskError(t, "learn", c, out, c.out.String())
	failed := strings.Count(serveLog.String(), "reload failed")
	if good, err = st.LatestGood(); err != nil {
		t.Fatal(err)
	}
	if v := version(); v > good.Version {
		t.Fatalf("serve reloaded v%d, past the newest good v%d", v, good.Version)
	}
	grow(t, disk)
	runCLI(t, append(args(out), "--resume"), 0, 3*time.Minute)
	final, err := st.LatestGood()
	if err != nil || final.Version != 6 {
		t.Fatalf("after the resume the newest good version is %+v (%v), want v6", final, err)
	}
	testenv.Eventually(t, time.Minute, "serve reloading v6", func() bool { return version() == final.Version })
	if strings.Contains(serveLog.String(), "panic") {
		t.Fatalf("serve panicked:\n%s", serveLog.String())
	}
	t.Logf("serve: %d failed reloads while the disk was full, then v%d", failed, final.Version)
}
