package reward

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Mode names a reward mode.
const (
	ModeSearchReplace = "search_replace"
	ModeUnidiff       = "unidiff"
)

// Record is one offline scoring request, as `swerl reward` reads it (JSONL
// or Parquet). A record with oracle_patches or pred_patches is scored in
// unidiff mode; otherwise code_context, oracle_new_content and output are
// scored in search/replace mode.
type Record struct {
	ID               string            `json:"id" parquet:"id"`
	CodeContext      map[string]string `json:"code_context,omitempty" parquet:"code_context"`
	OracleNewContent map[string]string `json:"oracle_new_content,omitempty" parquet:"oracle_new_content"`
	Output           string            `json:"output,omitempty" parquet:"output"`
	OraclePatches    []string          `json:"oracle_patches,omitempty" parquet:"oracle_patches,list"`
	PredPatches      []string          `json:"pred_patches,omitempty" parquet:"pred_patches,list"`
	// ModeName forces the mode (ModeSearchReplace or ModeUnidiff); empty
	// means: unidiff when any patch is given, else search/replace.
	ModeName string `json:"mode,omitempty" parquet:"mode"`
}

// OptionalColumns are the Parquet columns a file of records may lack: all
// but id, since a file for one mode has no use for the other's columns.
func (Record) OptionalColumns() []string {
	return []string{"code_context", "oracle_new_content", "output", "oracle_patches", "pred_patches", "mode"}
}

// Mode reports which reward the record asks for.
func (r *Record) Mode() string {
	if r.ModeName != "" {
		return r.ModeName
	}
	if len(r.OraclePatches) > 0 || len(r.PredPatches) > 0 {
		return ModeUnidiff
	}
	return ModeSearchReplace
}

// Scored is the result of one Record: its reward, and either why it scored
// −1 or the per-file similarities. Line is the 1-based input line (or row)
// the record came from.
type Scored struct {
	ID           string             `json:"id" parquet:"id"`
	Line         int64              `json:"line" parquet:"line"`
	Mode         string             `json:"mode,omitempty" parquet:"mode"`
	Reward       float64            `json:"reward" parquet:"reward"`
	Error        string             `json:"error,omitempty" parquet:"error"`
	Similarities map[string]float64 `json:"similarities,omitempty" parquet:"similarities"`
}

// DefaultTimeout is the default cap on scoring one answer in swerl's
// pipelines (train, eval) and the --reward-timeout flag's default.
const DefaultTimeout = 30 * time.Second

// Score scores one record. timeout (0: none) caps the similarity
// computation; a record over it scores −1 with an error naming the limit.
func Score(ctx context.Context, r *Record, timeout time.Duration) Result {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var res Result
	switch r.Mode() {
	case ModeUnidiff:
		res = Unidiff(ctx, r.OraclePatches, r.PredPatches)
	case ModeSearchReplace:
		res = SearchReplace(ctx, r.CodeContext, r.OracleNewContent, r.Output)
	default:
		return Result{Reward: -1, Error: fmt.Sprintf("unknown mode %q: want %s or %s", r.ModeName, ModeSearchReplace, ModeUnidiff)}
	}
	if timeout > 0 && res.Error != "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.Error = "timeout: similarity computation exceeded --timeout " + timeout.String()
	}
	return res
}
