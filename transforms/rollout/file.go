package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"swerl/internal/jsonscan"
)

func init() {
	RegisterScheme("file", OpenFile)
}

// FilePolicy replays recorded completions: a JSONL file with one line per
// instance, {"instance_id": "…", "completions": [ … ]}, where each completion
// is a string or an object {"text": …, "logprobs": [ … ], "finish_reason": …,
// "tokens": [ … ]}; an optional "policy_version" (default -1) is reported as
// the version that produced that line's completions. Used for offline re-scoring and tests.
type FilePolicy struct {
	path    string
	byID    map[string]fileLine
	version int64
}

type fileLine struct {
	InstanceID    string            `json:"instance_id"`
	Completions   []json.RawMessage `json:"completions"`
	PolicyVersion *int64            `json:"policy_version"`
	parsed        []Completion
}

type fileCompletion struct {
	Text         string    `json:"text"`
	LogProbs     []float32 `json:"logprobs"`
	Tokens       []int32   `json:"tokens"`
	FinishReason string    `json:"finish_reason"`
}

// OpenFile opens "file:PATH"; it reads the whole file, failing with the line
// number on a malformed or duplicate line. Lines are decoded on every core:
// a file of many groups is read before the first rollout can start.
func OpenFile(spec string) (Policy, error) {
	path := strings.TrimPrefix(spec, "file:")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	var lines [][]byte
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		lines, data = append(lines, bytes.TrimSuffix(line, []byte{'\r'})), rest
	}
	parsed := make([]*fileLine, len(lines))
	errs := make([]error, len(lines))
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), len(lines)/64+1)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(lines); i += workers {
				parsed[i], errs[i] = parseFileLine(lines[i])
			}
		})
	}
	wg.Wait()
	p := &FilePolicy{path: path, byID: make(map[string]fileLine, len(lines)), version: -1}
	for i, line := range parsed {
		if errs[i] != nil {
			return nil, fmt.Errorf("rollout: %s:%d: %w", path, i+1, errs[i])
		}
		if line == nil {
			continue
		}
		if _, dup := p.byID[line.InstanceID]; dup {
			return nil, fmt.Errorf("rollout: %s:%d: instance %q listed twice", path, i+1, line.InstanceID)
		}
		if line.PolicyVersion != nil {
			p.version = max(p.version, *line.PolicyVersion)
		}
		p.byID[line.InstanceID] = *line
	}
	return p, nil
}

// parseFileLine decodes one line of a completions file; nil for a blank line.
func parseFileLine(b []byte) (*fileLine, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	l, ok := fastFileLine(b)
	if !ok {
		var err error
		if l, err = slowFileLine(b); err != nil {
			return nil, err
		}
	}
	if l.InstanceID == "" {
		return nil, fmt.Errorf("no instance_id")
	}
	for i := range l.parsed {
		if l.parsed[i].FinishReason == "" {
			l.parsed[i].FinishReason = "stop"
		}
	}
	return l, nil
}

// slowFileLine decodes a line with encoding/json, which words the errors.
func slowFileLine(b []byte) (*fileLine, error) {
	var l fileLine
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	for i, raw := range l.Completions {
		var c fileCompletion
		if err := json.Unmarshal(raw, &c.Text); err != nil {
			if err := json.Unmarshal(raw, &c); err != nil {
				return nil, fmt.Errorf("instance %s: completion %d: want a string or an object with \"text\": %v", l.InstanceID, i, err)
			}
		}
		l.parsed = append(l.parsed, Completion{Text: c.Text, LogProbs: c.LogProbs, Tokens: c.Tokens, FinishReason: c.FinishReason})
	}
	l.Completions = nil
	return &l, nil
}

var (
	fileLineFields       = [...]string{"instance_id", "completions", "policy_version"}
	fileCompletionFields = [...]string{"text", "logprobs", "tokens", "finish_reason"}
)

// fastFileLine decodes the usual shape of a line in one pass and gives up
// (false) on anything else (a null completion, a repeated or case-folded
// key, a number out of its field's range, invalid UTF-8 …), which
// slowFileLine then decodes or words. Where it says ok, the line is what
// slowFileLine gives (FuzzParseFileLine). One pass matters because
// encoding/json would validate each line and then decode each completion
// twice.
func fastFileLine(b []byte) (*fileLine, bool) {
	var l fileLine
	ok := jsonscan.Try(b, func(p *jsonscan.Scanner) bool {
		return p.Fields(fileLineFields[:], func(f int) bool {
			switch f {
			case 0:
				var ok bool
				l.InstanceID, ok = p.Str()
				return ok
			case 1:
				return p.Array(func() bool {
					c, ok := fastCompletion(p)
					l.parsed = append(l.parsed, c)
					return ok
				})
			default:
				v, ok := p.Int()
				l.PolicyVersion = &v
				return ok
			}
		})
	})
	return &l, ok
}

// fastCompletion reads a completion: a string, or an object with text,
// logprobs, tokens and finish_reason.
func fastCompletion(p *jsonscan.Scanner) (Completion, bool) {
	var c Completion
	if s, ok := p.Str(); ok {
		c.Text = s
		return c, true
	}
	ok := p.Fields(fileCompletionFields[:], func(f int) bool {
		var ok bool
		switch f {
		case 0:
			c.Text, ok = p.Str()
		case 1:
			c.LogProbs = []float32{}
			ok = p.Array(func() bool {
				x, ok := p.Float(32)
				c.LogProbs = append(c.LogProbs, float32(x))
				return ok
			})
		case 2:
			c.Tokens = []int32{}
			ok = p.Array(func() bool {
				n, ok := p.Int()
				c.Tokens = append(c.Tokens, int32(n))
				return ok && n == int64(int32(n))
			})
		default:
			c.FinishReason, ok = p.Str()
		}
		return ok
	})
	return c, ok
}

// Complete returns the first N recorded completions of req.InstanceID. It
// fails when the instance is missing or has fewer than N.
func (p *FilePolicy) Complete(_ context.Context, req Request) (Response, error) {
	l, ok := p.byID[req.InstanceID]
	if !ok {
		return Response{}, fmt.Errorf("rollout: %s has no completions for instance %q", p.path, req.InstanceID)
	}
	if len(l.parsed) < req.N {
		return Response{}, fmt.Errorf("rollout: %s has %d completions for instance %q, want %d", p.path, len(l.parsed), req.InstanceID, req.N)
	}
	v := int64(-1)
	if l.PolicyVersion != nil {
		v = *l.PolicyVersion
	}
	out := make([]Completion, req.N)
	copy(out, l.parsed)
	return Response{Completions: out, PolicyVersion: v}, nil
}

// Version is the highest policy_version the file names, or -1.
func (p *FilePolicy) Version() int64 { return p.version }

// Close does nothing.
func (p *FilePolicy) Close() error { return nil }
