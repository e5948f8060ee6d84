package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Version is the schema_version this build writes and the newest it reads.
const Version = 1

// Sources of an Instance.
const (
	SourceGit       = "git"
	SourceGHArchive = "gharchive"
	SourceSWEBench  = "swebench"
)

// ChangeStats summarises an instance's oracle change.
type ChangeStats struct {
	FilesChanged int `json:"files_changed" parquet:"files_changed"`
	LinesAdded   int `json:"lines_added" parquet:"lines_added"`
	LinesDeleted int `json:"lines_deleted" parquet:"lines_deleted"`
	Hunks        int `json:"hunks" parquet:"hunks"`
	PatchBytes   int `json:"patch_bytes" parquet:"patch_bytes"`
}

// Instance is one merged pull request turned into an SWE-RL task: the issue
// to solve, the code at the merge base, and the oracle change.
//
// ID is "owner/repo#<pr_number>". CodeContext holds every file shown to the
// policy (modified and relevant files) at the base commit; OracleNewContent
// holds the modified files after the PR (an absent key in CodeContext means
// a new file; an empty string in OracleNewContent means the file was
// deleted). OraclePatch is a git-compatible unified diff of the same change.
type Instance struct {
	SchemaVersion    int               `json:"schema_version" parquet:"schema_version"`
	ID               string            `json:"id" parquet:"id"`
	Repo             string            `json:"repo" parquet:"repo"`
	PRNumber         int               `json:"pr_number" parquet:"pr_number"`
	BaseCommit       string            `json:"base_commit" parquet:"base_commit"`
	MergeCommit      string            `json:"merge_commit" parquet:"merge_commit"`
	CreatedAt        string            `json:"created_at" parquet:"created_at"` // RFC 3339
	ProblemStatement string            `json:"problem_statement" parquet:"problem_statement"`
	PRTitle          string            `json:"pr_title" parquet:"pr_title"`
	PRBody           string            `json:"pr_body" parquet:"pr_body"`
	PRUser           string            `json:"pr_user,omitempty" parquet:"pr_user"`
	HeadCommit       string            `json:"head_commit,omitempty" parquet:"head_commit"`
	LinkedIssues     []int             `json:"linked_issues" parquet:"linked_issues,list"`
	CodeContext      map[string]string `json:"code_context" parquet:"code_context"`
	OracleNewContent map[string]string `json:"oracle_new_content" parquet:"oracle_new_content"`
	OraclePatch      string            `json:"oracle_patch" parquet:"oracle_patch"`
	RelevantFiles    []string          `json:"relevant_files" parquet:"relevant_files,list"`
	Language         string            `json:"language" parquet:"language"`
	Stats            ChangeStats       `json:"stats" parquet:"stats"`
	Source           string            `json:"source" parquet:"source"`
}

// Rollout is one completion of the policy for one instance. The G rollouts of
// an instance for one policy version share GroupID.
type Rollout struct {
	SchemaVersion    int       `json:"schema_version" parquet:"schema_version"`
	ID               string    `json:"id" parquet:"id"` // "<group_id>/<index>"
	InstanceID       string    `json:"instance_id" parquet:"instance_id"`
	GroupID          string    `json:"group_id" parquet:"group_id"`
	GroupSize        int       `json:"group_size" parquet:"group_size"`
	Index            int       `json:"index" parquet:"index"` // 0 ≤ index < group_size
	PolicyVersion    int64     `json:"policy_version" parquet:"policy_version"`
	System           string    `json:"system,omitempty" parquet:"system"` // the system prompt
	Prompt           string    `json:"prompt" parquet:"prompt"`
	PromptTokens     []int32   `json:"prompt_tokens,omitempty" parquet:"prompt_tokens,list"`
	Completion       string    `json:"completion" parquet:"completion"`
	CompletionTokens []int32   `json:"completion_tokens,omitempty" parquet:"completion_tokens,list"`
	LogProbs         []float32 `json:"logprobs,omitempty" parquet:"logprobs,list"`
	FinishReason     string    `json:"finish_reason" parquet:"finish_reason"`
	LatencyMS        int64     `json:"latency_ms" parquet:"latency_ms"`
	// Temperature is the sampling temperature the completion was drawn at
	// (0: not recorded). The learner trains at its own --temperature and
	// skips a sample drawn at another.
	Temperature float64 `json:"temperature,omitempty" parquet:"temperature"`
	// LogProbsProcessed says LogProbs are of the sampler's processed
	// distribution, softmax(logits/Temperature), rather than the raw one
	// at temperature 1 (swerl's sampler and vLLM's default).
	LogProbsProcessed bool   `json:"logprobs_processed,omitempty" parquet:"logprobs_processed"`
	CreatedAt         string `json:"created_at" parquet:"created_at"` // RFC 3339
}

// Sample is a Rollout scored by the reward, with its group-relative advantage.
type Sample struct {
	Rollout
	Reward       float64            `json:"reward" parquet:"reward"`
	FormatError  string             `json:"format_error,omitempty" parquet:"format_error"`
	Similarities map[string]float64 `json:"similarities,omitempty" parquet:"similarities"`
	Advantage    float64            `json:"advantage" parquet:"advantage"`
	GroupMean    float64            `json:"group_mean" parquet:"group_mean"`
	GroupStd     float64            `json:"group_std" parquet:"group_std"`
	// GroupComplete is false when the group was emitted after its timeout
	// with fewer than GroupSize members.
	GroupComplete bool   `json:"group_complete" parquet:"group_complete"`
	Repo          string `json:"repo" parquet:"repo"`
	// Source is where the sample was read back from ("topic@partition:offset"
	// or "file:line"); empty until then.
	Source string `json:"source,omitempty" parquet:"source"`
}

// OptionalColumns are the Parquet columns of an Instance that a file may
// lack (fields added after files were written without them); they read as
// empty. A file missing any other column is refused (sinks/parquetio).
func (Instance) OptionalColumns() []string { return []string{"pr_user", "head_commit"} }

// OptionalColumns are the Parquet columns of a Rollout a file may lack:
// system, temperature and logprobs_processed came after the first files.
func (Rollout) OptionalColumns() []string {
	return []string{"system", "temperature", "logprobs_processed"}
}

// OptionalColumns are the Parquet columns of a Sample a file may lack.
func (Sample) OptionalColumns() []string {
	return append(Rollout{}.OptionalColumns(), "source")
}

// TopicOffset is how far a consumer read one partition: the next offset to read.
type TopicOffset struct {
	Topic     string `json:"topic" parquet:"topic"`
	Partition int    `json:"partition" parquet:"partition"`
	Offset    int64  `json:"offset" parquet:"offset"`
}

// FileHash is the sha256 of one checkpoint file.
type FileHash struct {
	Path   string `json:"path" parquet:"path"`
	SHA256 string `json:"sha256" parquet:"sha256"`
	Bytes  int64  `json:"bytes" parquet:"bytes"`
}

// WeightVersion is one published policy checkpoint: a row of index.parquet
// and the value announced on the weights topic.
type WeightVersion struct {
	SchemaVersion int           `json:"schema_version" parquet:"schema_version"`
	Version       int64         `json:"version" parquet:"version"`
	Step          int64         `json:"step" parquet:"step"`
	Parent        int64         `json:"parent" parquet:"parent"` // -1 for the initial version
	URI           string        `json:"uri" parquet:"uri"`
	Files         []FileHash    `json:"files" parquet:"files,list"`
	CreatedAt     string        `json:"created_at" parquet:"created_at"` // RFC 3339
	Loss          float64       `json:"loss" parquet:"loss"`
	KL            float64       `json:"kl" parquet:"kl"`
	MeanReward    float64       `json:"mean_reward" parquet:"mean_reward"`
	Tokens        int64         `json:"tokens" parquet:"tokens"`
	Samples       int64         `json:"samples" parquet:"samples"`
	Offsets       []TopicOffset `json:"offsets" parquet:"offsets,list"`
	// Adapter is the name a LoRA version is loaded as on an engine
	// (engineapi.AdapterName, "swerl-v000123"), "" for full weights or
	// where the announcement does not say.
	Adapter string `json:"adapter,omitempty" parquet:"adapter"`
	// Engines are the engines (engineapi.BaseURL) that confirmed loading
	// this version: the learner announces a version again once its push
	// to engines completes. Empty in index.parquet and in the announcement
	// made when the version is published.
	Engines []string `json:"engines,omitempty" parquet:"engines,list"`
}

// OptionalColumns are the Parquet columns of a WeightVersion a file may
// lack: adapter and engines came after the first checkpoint indexes.
func (WeightVersion) OptionalColumns() []string { return []string{"adapter", "engines"} }

// DeadLetter is a record that could not be decoded, prompted or scored,
// routed aside with the reason instead of being dropped.
type DeadLetter struct {
	SchemaVersion int    `json:"schema_version" parquet:"schema_version"`
	Stage         string `json:"stage" parquet:"stage"`   // e.g. "decode", "prompt", "reward"
	Source        string `json:"source" parquet:"source"` // topic@partition:offset, file:line, …
	Key           string `json:"key" parquet:"key"`
	Reason        string `json:"reason" parquet:"reason"`
	Value         []byte `json:"value" parquet:"value"`
	CreatedAt     string `json:"created_at" parquet:"created_at"`
}

// record is implemented by every versioned record.
type record interface {
	*Instance | *Rollout | *Sample | *WeightVersion | *DeadLetter
}

func versionOf[T record](r T) *int {
	switch v := any(r).(type) {
	case *Instance:
		return &v.SchemaVersion
	case *Rollout:
		return &v.SchemaVersion
	case *Sample:
		return &v.SchemaVersion
	case *WeightVersion:
		return &v.SchemaVersion
	case *DeadLetter:
		return &v.SchemaVersion
	}
	panic("unreachable")
}

// Encode returns the JSON wire form of r, setting schema_version when it is
// zero. Map keys are sorted, so equal records encode to equal bytes.
func Encode[T record](r T) ([]byte, error) {
	if s, ok := any(r).(*Sample); ok {
		var e SampleEncoder
		return e.Append(nil, s)
	}
	if p := versionOf(r); *p == 0 {
		*p = Version
	}
	return json.Marshal(r)
}

// versionUnset marks an Instance's schema_version before decoding, so that
// Decode can tell a missing one from an explicit 0.
const versionUnset = math.MinInt

// Decode parses the JSON wire form into r. It fails, naming the problem and
// the record (by id where it has one), on invalid JSON, trailing data, a
// schema_version that this build does not read (newer than Version, zero
// or negative), a missing one, or a field of the wrong type. Unknown fields
// are ignored (forward compatibility).
//
// An Instance without schema_version (or with null) reads as Version:
// instance files from other tools, SWE-bench-style datasets among them, do
// not carry one. Other records come from swerl only, and must carry one.
func Decode[T record](data []byte, r T) error {
	ver := versionOf(r)
	in, isInstance := any(r).(*Instance)
	var missing bool
	if isInstance && decodeInstanceFast(data, in, versionUnset) {
		missing = *ver == versionUnset // the fast path refuses the literal math.MinInt
	} else {
		unset := isInstance && *ver == 0
		if unset {
			*ver = versionUnset
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		err := dec.Decode(r)
		if err == nil && dec.More() {
			err = errors.New("trailing data after the JSON value")
		}
		if err != nil {
			if unset && *ver == versionUnset {
				*ver = 0 // no marker left behind
			}
			return fmt.Errorf("schemas: decode %s: %w", describe(r), err)
		}
		missing = unset && *ver == versionUnset && !explicitVersion(data)
	}
	if missing {
		*ver = Version
	}
	switch v := *ver; {
	case v == 0 && !isInstance:
		return fmt.Errorf("schemas: decode %s: missing schema_version", describe(r))
	case v > Version:
		return fmt.Errorf("schemas: decode %s: schema_version %d is newer than this build understands (%d)", describe(r), v, Version)
	case v <= 0:
		return fmt.Errorf("schemas: decode %s: invalid schema_version %d", describe(r), v)
	}
	return nil
}

// explicitVersion reports whether data, a JSON object that decoded,
// holds a non-null schema_version (as encoding/json matches keys). Decode
// asks only when an Instance's version is still versionUnset: missing,
// null, or the literal math.MinInt.
func explicitVersion(data []byte) bool {
	var probe struct {
		V *int `json:"schema_version"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.V != nil
}

// describe names r for an error: its kind and, where it has one, its id.
func describe[T record](r T) string {
	named := func(kind, id string) string {
		if id == "" {
			return kind
		}
		return kind + " " + strconv.Quote(id)
	}
	switch v := any(r).(type) {
	case *Instance:
		return named("instance", v.ID)
	case *Rollout:
		return named("rollout", v.ID)
	case *Sample:
		return named("sample", v.ID)
	case *WeightVersion:
		if v.Version == 0 {
			return "weight version"
		}
		return "weight version " + strconv.FormatInt(v.Version, 10)
	case *DeadLetter:
		return named("dead letter", v.Key)
	}
	return fmt.Sprintf("%T", r)
}

// SortedPaths returns the keys of m in byte order: the canonical order in
// which swerl shows and diffs files.
func SortedPaths[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Validate checks the invariants every Instance must hold before it is used
// for training; the error names the instance and the field.
func (in *Instance) Validate() error {
	switch {
	case in.ID == "":
		return fmt.Errorf("schemas: instance: empty id")
	case len(in.OracleNewContent) == 0:
		return fmt.Errorf("schemas: instance %s: no oracle_new_content", in.ID)
	}
	for p := range in.OracleNewContent {
		if p == "" {
			return fmt.Errorf("schemas: instance %s: empty path in oracle_new_content", in.ID)
		}
	}
	return nil
}
