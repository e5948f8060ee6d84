package train_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"golang.org/x/sync/errgroup"

	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/transforms/reward"
	"swerl/transforms/scoring"
)

// benchInstances is the number of instances per benchmark run
// (SWERL_BENCH_INSTANCES, default 400), each with G = 4 completions.
func benchInstances() int {
	if n, err := strconv.Atoi(os.Getenv("SWERL_BENCH_INSTANCES")); err == nil && n > 0 {
		return n
	}
	return 400
}

const benchG = 4

// benchInput writes n instances and their completions, and produces the
// instances to a fresh embedded broker's instances topic.
func benchInput(b *testing.B, n int) (*traintest.Set, kafkaio.Config, func()) {
	b.Helper()
	dir := b.TempDir()
	set := traintest.New(b, dir, n, benchG, nil)
	br, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 4})
	if err != nil {
		b.Fatal(err)
	}
	c := br.Config("")
	if _, err := train.Feed(context.Background(), c, set.InstancesPath, filepath.Join(dir, "dead")); err != nil {
		b.Fatal(err)
	}
	return set, c, br.Close
}

// BenchmarkRawKafka is raw kafka-go with no prompt, rollout, reward or
// Beam: it consumes the instances topic and produces G records per
// instance (the instance's bytes as the value, zstd, keyed) to the samples
// topic on the same embedded broker, reading the partitions one after
// another. BenchmarkRawKafkaParallel, which reads them at once, is the
// floor the pipeline is measured against.
func BenchmarkRawKafka(b *testing.B) { benchRawKafka(b, false) }

// BenchmarkRawKafkaParallel is BenchmarkRawKafka with a goroutine per
// partition sharing one writer, as the pipeline reads its partitions: the
// floor.
func BenchmarkRawKafkaParallel(b *testing.B) { benchRawKafka(b, true) }

func benchRawKafka(b *testing.B, parallel bool) {
	n := benchInstances()
	_, c, stop := benchInput(b, n)
	defer stop()
	ctx := context.Background()
	parts, err := kafkaio.Partitions(ctx, c, c.Topic(kafkaio.Instances))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime(b)
	var total atomic.Int64
	for it := 0; it < b.N; it++ {
		w := &kafka.Writer{Addr: kafka.TCP(c.Brokers...), Topic: c.Topic(kafkaio.Samples), Balancer: &kafka.Murmur2Balancer{},
			BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, Compression: compress.Zstd, RequiredAcks: kafka.RequireAll}
		copyPartition := func(p int) error {
			conn, err := kafka.DialLeader(ctx, "tcp", c.Brokers[0], c.Topic(kafkaio.Instances), p)
			if err != nil {
				return err
			}
			last, _ := conn.ReadLastOffset()
			conn.Close()
			if last == 0 {
				return nil
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Brokers, Topic: c.Topic(kafkaio.Instances), Partition: p, MaxWait: 50 * time.Millisecond})
			defer r.Close()
			var out []kafka.Message
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return err
				}
				for j := 0; j < benchG; j++ {
					out = append(out, kafka.Message{Key: []byte(fmt.Sprintf("%s/%d", m.Key, j)), Value: m.Value})
				}
				if m.Offset+1 >= last {
					break
				}
			}
			if err := w.WriteMessages(ctx, out...); err != nil {
				return err
			}
			total.Add(int64(len(out)))
			return nil
		}
		var g errgroup.Group
		for _, p := range parts {
			if !parallel {
				if err := copyPartition(p); err != nil {
					b.Fatal(err)
				}
				continue
			}
			g.Go(func() error { return copyPartition(p) })
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		w.Close()
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(total.Load())/el, "records/s")
	b.ReportMetric((cpuTime(b)-cpu).Seconds()*1e6/float64(total.Load()), "cpu-µs/record")
}

// cpuTime is the CPU time (user and system) this process has used: the
// benchmarks report it per record, the embedded broker's share included
// in both, so the work a record costs can be compared with the two cores'
// budget, not only the wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTrainKafka runs the whole train pipeline on Prism: instances
// topic → decode → prompt → file-policy rollout → reward → group →
// advantage → samples topic and Parquet.
func BenchmarkTrainKafka(b *testing.B) {
	n := benchInstances()
	set, c, stop := benchInput(b, n)
	defer stop()
	b.ResetTimer()
	var samples int64
	var el float64
	cpu := cpuTime(b)
	for it := 0; it < b.N; it++ {
		out := filepath.Join(b.TempDir(), "out") // fresh positions: read the topic again
		start := time.Now()
		sum, err := train.Run(context.Background(), train.Config{Kafka: c, Bounded: true,
			Policy: "file:" + set.CompletionsPath, Out: out,
			Spec: scoring.Spec{GroupSize: benchG}})
		el += time.Since(start).Seconds()
		if err != nil {
			b.Fatal(err)
		}
		if sum.Samples != int64(n*benchG) {
			b.Fatalf("%d samples, want %d", sum.Samples, n*benchG)
		}
		samples += sum.Samples
	}
	b.ReportMetric(float64(samples)/el, "samples/s")
	b.ReportMetric((cpuTime(b)-cpu).Seconds()*1e6/float64(samples), "cpu-µs/sample")
}

// TestTrainMemoryFlat runs the pipeline unbounded while instances keep
// arriving (about 400 a second) for SWERL_MEMORY_RUN (a duration; skipped
// when unset) and logs the live heap every tenth of the run: it must not
// grow with the input. Set SWERL_BROKERS to a broker in another process
// (`swerl broker --addr 127.0.0.1:9092`): the embedded broker keeps every
// record in this process's heap, which would hide the pipeline's own. With
// SWERL_MEMORY_PROFILES=DIR each reading also writes DIR/heap-NN.pprof, so
// `go tool pprof -top -base heap-01.pprof heap-10.pprof` names what grew.
func TestTrainMemoryFlat(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SWERL_MEMORY_RUN"))
	if err != nil {
		t.Skip("set SWERL_MEMORY_RUN=10m to run")
	}
	dir := t.TempDir()
	const distinct = 200
	set := traintest.New(t, dir, distinct, benchG, nil)
	var c kafkaio.Config
	if b := os.Getenv("SWERL_BROKERS"); b != "" {
		c = kafkaio.Config{Brokers: strings.Split(b, ","), TopicPrefix: fmt.Sprintf("mem%d.", time.Now().UnixNano())}
		var topics []string
		for _, n := range kafkaio.TopicNames {
			topics = append(topics, c.Topic(n))
		}
		if err := kafkaio.EnsureTopics(context.Background(), c, 4, topics...); err != nil {
			t.Fatal(err)
		}
	} else {
		br, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer br.Close()
		c = br.Config("")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var sum train.Summary
	go func() {
		var err error
		sum, err = train.Run(ctx, train.Config{Kafka: c, Policy: "file:" + set.CompletionsPath,
			Out: filepath.Join(dir, "out"), RowsPerFile: 100000, ProgressEvery: d / 10, Progress: os.Stderr,
			Spec: scoring.Spec{GroupSize: benchG}})
		done <- err
	}()
	w := &kafka.Writer{Addr: kafka.TCP(c.Brokers...), Topic: c.Topic(kafkaio.Instances), Balancer: &kafka.Murmur2Balancer{},
		BatchTimeout: 5 * time.Millisecond, Compression: compress.Zstd}
	defer w.Close()
	vals := make([][]byte, distinct)
	for i := range vals {
		vals[i], _ = schemas.Encode(&set.Instances[i])
	}
	start := time.Now()
	next := start
	sent := 0
	var heaps []uint64
	for time.Since(start) < d {
		batch := make([]kafka.Message, 20)
		for j := range batch {
			i := sent % distinct
			batch[j] = kafka.Message{Key: []byte(set.Instances[i].ID), Value: vals[i]}
			sent++
		}
		if err := w.WriteMessages(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // ≈ 400 instances/s offered
		if time.Now().After(next) {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heaps = append(heaps, ms.HeapInuse)
			t.Logf("%6.0fs: %d instances produced, heap in use %.1f MiB", time.Since(start).Seconds(), sent, float64(ms.HeapInuse)/(1<<20))
			if pd := os.Getenv("SWERL_MEMORY_PROFILES"); pd != "" {
				writeHeapProfile(t, filepath.Join(pd, fmt.Sprintf("heap-%02d.pprof", len(heaps))))
			}
			next = next.Add(d / 10)
		}
	}
	cancel()
	<-done
	t.Logf("summary: %s", sum)
	if len(heaps) >= 4 && heaps[len(heaps)-1] > 3*heaps[1] {
		t.Errorf("heap grew from %d to %d bytes", heaps[1], heaps[len(heaps)-1])
	}
}

// BenchmarkTrainFile is BenchmarkTrainKafka with the instances read from
// the JSONL file and no Kafka at all (Parquet output only): the pipeline's
// own cost without the Kafka plane.
func BenchmarkTrainFile(b *testing.B) {
	n := benchInstances()
	set := traintest.New(b, b.TempDir(), n, benchG, nil)
	b.ResetTimer()
	var samples int64
	var el float64
	cpu := cpuTime(b)
	for it := 0; it < b.N; it++ {
		out := filepath.Join(b.TempDir(), "out")
		start := time.Now()
		sum, err := train.Run(context.Background(), train.Config{Instances: set.InstancesPath,
			Policy: "file:" + set.CompletionsPath, Out: out,
			Spec: scoring.Spec{GroupSize: benchG}})
		el += time.Since(start).Seconds()
		if err != nil {
			b.Fatal(err)
		}
		samples += sum.Samples
	}
	b.ReportMetric(float64(samples)/el, "samples/s")
	b.ReportMetric((cpuTime(b)-cpu).Seconds()*1e6/float64(samples), "cpu-µs/sample")
}

func writeHeapProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkReward is the reward stage alone on the benchmarks' data, on one
// goroutine: a reward.Task per instance (the oracle's normalized diff made
// once) scoring its G completions. Its cpu-µs/sample is the least any
// pipeline that scores every sample must spend, set against the floor's
// cpu-µs/record.
func BenchmarkReward(b *testing.B) {
	set := traintest.New(b, b.TempDir(), benchInstances(), benchG, nil)
	ctx := context.Background()
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime(b)
	samples := 0
	for it := 0; it < b.N; it++ {
		for _, in := range set.Instances {
			task := reward.NewTask(in.CodeContext, in.OracleNewContent)
			for _, c := range set.Completions[in.ID] {
				if r := task.Score(ctx, c); r.Reward < -1 || r.Reward > 1 {
					b.Fatalf("%s: reward %v", in.ID, r.Reward)
				}
				samples++
			}
		}
	}
	b.ReportMetric(float64(samples)/time.Since(start).Seconds(), "samples/s")
	b.ReportMetric((cpuTime(b)-cpu).Seconds()*1e6/float64(samples), "cpu-µs/sample")
}
