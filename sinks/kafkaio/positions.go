package kafkaio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Position)(nil)).Elem())
	register.DoFn3x0[context.Context, Position, func(int)](&ackFn{})
	register.Function1x1[Message, Position](messagePosition)
	register.Function2x1[Message, func(Position), error](originPosition)
}

// Position is one record of a topic: where it was read.
type Position struct {
	Topic     string
	Partition int
	Offset    int64
}

// String returns "topic@partition:offset".
func (p Position) String() string { return source(p.Topic, p.Partition, p.Offset) }

// ParsePosition parses "topic@partition:offset" (Message.Source,
// schemas.Sample.Source, DeadLetter.Source).
func ParsePosition(s string) (Position, error) {
	at := strings.LastIndexByte(s, '@')
	colon := strings.LastIndexByte(s, ':')
	if at <= 0 || colon < at {
		return Position{}, fmt.Errorf("kafkaio: position %q: want topic@partition:offset", s)
	}
	p, err := strconv.Atoi(s[at+1 : colon])
	if err != nil || p < 0 {
		return Position{}, fmt.Errorf("kafkaio: position %q: bad partition", s)
	}
	o, err := strconv.ParseInt(s[colon+1:], 10, 64)
	if err != nil || o < 0 {
		return Position{}, fmt.Errorf("kafkaio: position %q: bad offset", s)
	}
	return Position{Topic: s[:at], Partition: p, Offset: o}, nil
}

func messagePosition(m Message) Position { return m.Position() }

// Positions maps a PCollection of Message to their Positions.
func Positions(s beam.Scope, msgs beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("kafkaio.Positions"), messagePosition, msgs)
}

func originPosition(m Message, emit func(Position)) error {
	if m.Origin == "" {
		return nil
	}
	p, err := ParsePosition(m.Origin)
	if err != nil {
		return fmt.Errorf("kafkaio: message with key %q: origin: %w", m.Key, err)
	}
	emit(p)
	return nil
}

// AckOrigins acknowledges the Origin of every message of written (the
// output of WriteAcked) in the positions files under dir. Messages without
// an Origin are ignored; an origin acknowledged many times (one input, many
// outputs) counts once. Use it only where all the outputs of an input are
// written in one bundle (emitted together by one element, as the G samples
// of a group are), or an input could be acknowledged before its last
// output is durable.
func AckOrigins(s beam.Scope, dir string, written beam.PCollection) {
	s = s.Scope("kafkaio.AckOrigins")
	Ack(s, dir, beam.ParDo(s, originPosition, written))
}

// Ack records the positions of col (a PCollection of Position) as finished
// in the positions files under dir (one file a topic). Pass a record's
// position only once everything the pipeline derives from it is durable
// (written and flushed, or dead-lettered). Positions are merged at the end
// of every bundle and the file is replaced atomically; a Read with
// PositionsDir dir resumes after them.
func Ack(s beam.Scope, dir string, col beam.PCollection) {
	s = s.Scope("kafkaio.Ack")
	Drain(s, beam.ParDo(s, &ackFn{Dir: dir}, col))
}

// AckOriginsGroup is AckOrigins for a read as a consumer group member
// (ReadConfig.GroupMember): the acknowledgements go to the member, which
// commits them to the group.
func AckOriginsGroup(s beam.Scope, member string, written beam.PCollection) {
	s = s.Scope("kafkaio.AckOriginsGroup")
	AckGroup(s, member, beam.ParDo(s, originPosition, written))
}

// AckGroup is Ack for a read as a consumer group member: the positions of
// col are acknowledged to the GroupMember of this process with Handle
// member, which commits each partition's offset up to its first record
// not yet acknowledged.
func AckGroup(s beam.Scope, member string, col beam.PCollection) {
	s = s.Scope("kafkaio.AckGroup")
	Drain(s, beam.ParDo(s, &ackFn{Member: member}, col))
}

// ackFn acknowledges positions in the positions files under Dir, or to
// the group member Member.
type ackFn struct {
	Dir    string
	Member string

	acked map[string]map[int][]int64
}

func (fn *ackFn) ProcessElement(_ context.Context, p Position, _ func(int)) {
	if fn.acked == nil {
		fn.acked = map[string]map[int][]int64{}
	}
	if fn.acked[p.Topic] == nil {
		fn.acked[p.Topic] = map[int][]int64{}
	}
	fn.acked[p.Topic][p.Partition] = append(fn.acked[p.Topic][p.Partition], p.Offset)
}

func (fn *ackFn) FinishBundle(_ context.Context, emit func(int)) error {
	n := 0
	if fn.Member != "" {
		m, err := memberOf(fn.Member)
		if err != nil {
			return err
		}
		var ps []Position
		for topic, parts := range fn.acked {
			for p, offs := range parts {
				for _, o := range offs {
					ps = append(ps, Position{Topic: topic, Partition: p, Offset: o})
				}
			}
		}
		m.ack(ps)
		clear(fn.acked)
		if len(ps) > 0 {
			emit(len(ps))
		}
		return nil
	}
	for topic, parts := range fn.acked {
		if err := updatePositions(fn.Dir, topic, posUpdate{Acked: parts}); err != nil {
			return err
		}
		n += len(parts)
	}
	clear(fn.acked)
	if n > 0 {
		emit(n)
	}
	return nil
}

// positionsFile is the JSON of one topic's positions.
type positionsFile struct {
	Topic string `json:"topic"`
	// ClusterID is the cluster the offsets belong to (see resolve).
	ClusterID  string                      `json:"cluster_id,omitempty"`
	Partitions map[int]*partitionPositions `json:"partitions"`
}

// partitionPositions: every offset below Next is finished, and so are
// the offsets in Done (all ≥ Next).
type partitionPositions struct {
	Next int64   `json:"next"`
	Done []int64 `json:"done,omitempty"`
}

func (f *positionsFile) partition(p int) *partitionPositions {
	if f == nil {
		return nil
	}
	return f.Partitions[p]
}

func (pp *partitionPositions) doneFrom(next int64) []int64 {
	var out []int64
	for _, o := range pp.Done {
		if o >= next {
			out = append(out, o)
		}
	}
	return out
}

// add marks offsets finished and advances Next over the contiguous ones.
func (pp *partitionPositions) add(offsets []int64) {
	set := map[int64]bool{}
	for _, o := range pp.Done {
		set[o] = true
	}
	for _, o := range offsets {
		if o >= pp.Next {
			set[o] = true
		}
	}
	for set[pp.Next] {
		delete(set, pp.Next)
		pp.Next++
	}
	pp.Done = pp.Done[:0]
	for o := range set {
		if o >= pp.Next {
			pp.Done = append(pp.Done, o)
		}
	}
	sort.Slice(pp.Done, func(i, j int) bool { return pp.Done[i] < pp.Done[j] })
}

func positionsPath(dir, topic string) string {
	return filepath.Join(dir, "positions-"+strings.NewReplacer("/", "_", string(os.PathSeparator), "_").Replace(topic)+".json")
}

// LoadPositions returns the next unacknowledged offset of every partition
// of topic recorded under dir (empty when nothing was recorded).
func LoadPositions(dir, topic string) (map[int]int64, error) {
	f, err := loadPositions(dir, topic)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	if f != nil {
		for p, pp := range f.Partitions {
			out[p] = pp.Next
		}
	}
	return out, nil
}

func loadPositions(dir, topic string) (*positionsFile, error) {
	path := positionsPath(dir, topic)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kafkaio: positions: %w", err)
	}
	var f positionsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("kafkaio: positions file %s: %w", path, err)
	}
	if f.Topic != topic {
		return nil, fmt.Errorf("kafkaio: positions file %s is for topic %q, not %q", path, f.Topic, topic)
	}
	if f.Partitions == nil {
		f.Partitions = map[int]*partitionPositions{}
	}
	for p, pp := range f.Partitions {
		switch {
		case p < 0:
			return nil, fmt.Errorf("kafkaio: positions file %s: partition %d is negative", path, p)
		case pp == nil:
			return nil, fmt.Errorf("kafkaio: positions file %s: partition %d has no positions", path, p)
		case pp.Next < 0 || pp.Next == math.MaxInt64:
			return nil, fmt.Errorf("kafkaio: positions file %s: partition %d: next offset %d is out of range", path, p, pp.Next)
		}
		for _, o := range pp.Done {
			if o < pp.Next || o == math.MaxInt64 {
				return nil, fmt.Errorf("kafkaio: positions file %s: partition %d: offset %d, listed as done out of order, is below next %d or out of range", path, p, o, pp.Next)
			}
		}
	}
	return &f, nil
}

// posMu serialises read-modify-write of positions files in this process
// (Prism runs every bundle in one process).
var posMu sync.Mutex

// posUpdate is one change to a positions file.
type posUpdate struct {
	// Cluster, when set, is recorded; with Reset the file starts over.
	Cluster string
	Reset   bool
	// Base sets the start of partitions not yet in the file; Force
	// overwrites partitions.
	Base, Force map[int]int64
	// Acked marks offsets finished.
	Acked map[int][]int64
}

// updatePositions applies u to the positions file of topic and replaces
// the file atomically.
func updatePositions(dir, topic string, u posUpdate) error {
	posMu.Lock()
	defer posMu.Unlock()
	f, err := loadPositions(dir, topic)
	if err != nil {
		return err
	}
	if f == nil || u.Reset {
		f = &positionsFile{Topic: topic, Partitions: map[int]*partitionPositions{}}
	}
	if u.Cluster != "" {
		f.ClusterID = u.Cluster
	}
	for p, next := range u.Base {
		if f.Partitions[p] == nil {
			f.Partitions[p] = &partitionPositions{Next: next}
		}
	}
	for p, next := range u.Force {
		f.Partitions[p] = &partitionPositions{Next: next}
	}
	for p, offs := range u.Acked {
		pp := f.Partitions[p]
		if pp == nil {
			// Acknowledged before any read recorded its start: start at
			// the lowest offset seen.
			lo := offs[0]
			for _, o := range offs {
				lo = min(lo, o)
			}
			pp = &partitionPositions{Next: lo}
			f.Partitions[p] = pp
		}
		pp.add(offs)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kafkaio: positions: %w", err)
	}
	path := positionsPath(dir, topic)
	tmp, err := os.CreateTemp(dir, ".positions-*.tmp")
	if err != nil {
		return fmt.Errorf("kafkaio: positions: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("kafkaio: positions %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("kafkaio: positions %s: %w", path, err)
	}
	return nil
}
