// Command synthetic runs paired GRPO runs on the learner tests' synthetic
// task (reward: the fraction of completion tokens below id 128) with a
// real sampler–trainer mismatch: the sampler serves the weights rounded to
// bfloat16 and, with -lag, a version several steps old, while the learner
// trains in float32. Each seed runs once per correction; the rows are the
// mean reward of each iteration's samples and the step records' rollout_kl,
// is_weight_max and grad_norm.
//
//	go run ./bench/offpolicy/synthetic -seeds 3 -iters 30 -lag 2 -lr 3e-2
//
// With -serve BIN the sampler is the engine path: BIN serve --bf16-weights
// in another process over the learner's output root (polling it every
// -poll), sampled through the HTTP policy with token ids; -wait makes each
// step wait until the server holds the newest version, else the server's
// own polling decides how stale the samples are.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/schemas"
	"swerl/transforms/rollout"
)

func main() {
	seeds := flag.Int("seeds", 3, "seeds (each runs once per correction)")
	iters := flag.Int("iters", 30, "RL steps a run")
	lag := flag.Int("lag", 1, "the sampler reloads the newest version every this many steps (1: on-policy up to bf16)")
	lr := flag.Float64("lr", 1e-2, "learning rate")
	corrs := flag.String("corrections", "off,token-tis", "corrections to pair")
	bf16 := flag.Bool("bf16", true, "the sampler serves bf16-rounded weights")
	serve := flag.String("serve", "", "a swerl binary: sample from its serve --bf16-weights in another process")
	poll := flag.Duration("poll", 50*time.Millisecond, "with -serve, how often the server looks for a new version")
	wait := flag.Bool("wait", true, "with -serve, wait each step until the server holds the newest version")
	flag.Parse()
	if *iters < 5 {
		log.Fatal("-iters must be at least 5")
	}
	eng := engine{bin: *serve, poll: *poll, wait: *wait}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for seed := 1; seed <= *seeds; seed++ {
		for _, name := range strings.Split(*corrs, ",") {
			corr, err := gpu.ParseCorrection(name)
			if err != nil {
				log.Fatal(err)
			}
			rewards, kls, wmax, grads, err := run(uint64(seed), corr, *iters, *lag, *lr, *bf16, eng, quiet)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("seed %d %-9s reward first5 %.3f last5 %.3f | rollout_kl mean %.2e max %.2e | is_weight_max max %.3f | grad_norm mean %.3f max %.3f\n",
				seed, name, mean(rewards[:5]), mean(rewards[len(rewards)-5:]), mean(kls), maxOf(kls), maxOf(wmax), mean(grads), maxOf(grads))
			fmt.Printf("  reward by step: %s\n", fmtRow(rewards))
		}
	}
}

func run(seed uint64, corr gpu.Correction, iters, lag int, lr float64, bf16 bool, eng engine, quiet *slog.Logger) (rewards, kls, wmax, grads []float64, err error) {
	dir, err := os.MkdirTemp("", "offpolicy-")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer os.RemoveAll(dir)
	model := filepath.Join(dir, "model")
	if _, err := modeldir.Init(model, "tiny", seed); err != nil {
		return nil, nil, nil, nil, err
	}
	out := filepath.Join(dir, "out")
	be := cpu.New()
	defer be.Close()
	l, err := learner.New(context.Background(), learner.Config{Out: out, Model: model, BatchGroups: 2, MaxStaleness: -1, Backend: be, Log: quiet,
		Train: gpu.TrainConfig{MaxBatch: 16, MaxSeq: 48, LR: lr, GRPO: gpu.GRPOParams{Correction: corr}}})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var pol rollout.Policy
	reload := func() error { return nil }
	if eng.bin != "" {
		hp, stop, err := eng.start(out)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		defer stop()
		pol = hp
		if eng.wait {
			reload = func() error { return waitVersion(hp, l.Version()) }
		}
	} else {
		mp, err := policy.Open(out, policy.Options{MaxSeq: 48, MaxTokens: 4, BF16Weights: bf16, Log: quiet})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		defer mp.Close()
		pol = mp
		reload = func() error { _, err := mp.Reload(); return err }
	}
	for it := range iters {
		if it%lag == 0 {
			if err := reload(); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		samples, r, err := rollouts(pol, int(seed)*10000+it, 2, 8)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		rewards = append(rewards, r)
		if _, err := l.Run(context.Background(), &learner.SliceSource{Samples: samples}, 0); err != nil {
			return nil, nil, nil, nil, err
		}
		rec, err := learner.ReadRecord(out, l.Version())
		if err != nil {
			return nil, nil, nil, nil, err
		}
		kls, wmax, grads = append(kls, rec.RolloutKL), append(wmax, rec.ISWeightMax), append(grads, rec.GradNorm)
	}
	return rewards, kls, wmax, grads, nil
}

// rollouts samples groups from pol and scores them with GRPO advantages
// (the learner tests' synthetic task).
func rollouts(pol rollout.Policy, it, groups, G int) ([]schemas.Sample, float64, error) {
	var out []schemas.Sample
	var total float64
	for g := range groups {
		resp, err := pol.Complete(context.Background(), rollout.Request{InstanceID: fmt.Sprintf("o/r#%d", g), Prompt: "write something", N: G, Seed: int64(it*1000 + g*G)})
		if err != nil {
			return nil, 0, err
		}
		var rs []float64
		var m, sd float64
		for _, c := range resp.Completions {
			hit := 0
			for _, t := range c.Tokens {
				if t < 128 {
					hit++
				}
			}
			rs = append(rs, float64(hit)/float64(len(c.Tokens)))
			m += rs[len(rs)-1] / float64(G)
		}
		for _, r := range rs {
			sd += (r - m) * (r - m) / float64(G)
		}
		sd = math.Sqrt(sd)
		gid := fmt.Sprintf("it%d-g%d", it, g)
		for i, c := range resp.Completions {
			total += rs[i]
			out = append(out, schemas.Sample{Rollout: schemas.Rollout{ID: fmt.Sprintf("%s/%d", gid, i), GroupID: gid, GroupSize: G, Index: i,
				PolicyVersion: resp.PolicyVersion, Prompt: "write something", PromptTokens: c.PromptTokens, CompletionTokens: c.Tokens,
				LogProbs: c.LogProbs, FinishReason: c.FinishReason}, Reward: rs[i], Advantage: (rs[i] - m) / (sd + 1e-6), GroupComplete: true})
		}
	}
	return out, total / float64(groups*G), nil
}

// engine starts swerl serve over an output root.
type engine struct {
	bin  string
	poll time.Duration
	wait bool
}

func (e engine) start(out string) (rollout.Policy, func(), error) {
	cmd := exec.Command(e.bin, "serve", "--model", out, "--name", "synth", "--addr", "127.0.0.1:0", "--bf16-weights",
		"--poll", e.poll.String(), "--max-seq", "48", "--max-tokens", "4", "--max-concurrent", "2", "--metrics-addr", "")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " on http://"); i >= 0 {
			url = strings.Fields(line[i+4:])[0]
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if url == "" {
		stop()
		return nil, nil, fmt.Errorf("swerl serve did not say where it listens")
	}
	pol, err := rollout.Open(url + "?model=synth&token_ids=true&concurrency=2&backoff=10ms")
	if err != nil {
		stop()
		return nil, nil, err
	}
	return pol, func() { pol.Close(); stop() }, nil
}

// waitVersion asks pol until an answer comes from version v or newer.
func waitVersion(pol rollout.Policy, v int64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := pol.Complete(context.Background(), rollout.Request{InstanceID: "probe", Prompt: "x", N: 1, MaxTokens: 1})
		if err != nil {
			return err
		}
		if resp.PolicyVersion >= v {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server still serves v%d, want v%d", resp.PolicyVersion, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

func fmtRow(xs []float64) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.2f", x)
	}
	return b.String()
}
