package schemas

import (
	"reflect"

	"swerl/internal/jsonscan"
)

// instanceFields are Instance's JSON names, in fastInstance's order.
var instanceFields = [...]string{"schema_version", "id", "repo", "pr_number", "base_commit", "merge_commit",
	"created_at", "problem_statement", "pr_title", "pr_body", "pr_user", "head_commit", "linked_issues",
	"code_context", "oracle_new_content", "oracle_patch", "relevant_files", "language", "stats", "source"}

var statsFields = [...]string{"files_changed", "lines_added", "lines_deleted", "hunks", "patch_bytes"}

// fastInstance decodes the common shape of an Instance's JSON in one pass:
// every known field with its plain type or null (json.Marshal writes a nil
// slice or map as null), other fields any JSON. It gives up (ok false) on
// anything else (duplicate or
// case-folded keys, numbers that are not int64 literals, escapes naming
// lone surrogates, invalid UTF-8) and Decode falls back to encoding/json.
// Where it says ok the result is json.Unmarshal's into a zero Instance
// (FuzzDecodeInstance). The train pipeline spent a tenth of its CPU
// decoding instances with encoding/json.
func fastInstance(b []byte) (in Instance, ok bool) {
	ok = jsonscan.Try(b, func(p *jsonscan.Scanner) bool {
		return p.Fields(instanceFields[:], func(f int) bool {
			var ok bool
			switch f {
			case 0:
				in.SchemaVersion, ok = readInt(p)
			case 3:
				in.PRNumber, ok = readInt(p)
			case 12:
				in.LinkedIssues = []int{}
				ok = p.Array(func() bool {
					n, ok := readInt(p)
					in.LinkedIssues = append(in.LinkedIssues, n)
					return ok
				})
			case 13:
				in.CodeContext, ok = p.StrMap()
			case 14:
				in.OracleNewContent, ok = p.StrMap()
			case 16:
				in.RelevantFiles, ok = p.StrList()
			case 18:
				ok = readStats(p, &in.Stats)
			default:
				var s string
				s, ok = p.Str()
				*instanceString(&in, f) = s
			}
			return ok
		})
	})
	return in, ok
}

func readInt(p *jsonscan.Scanner) (int, bool) {
	n, ok := p.Int()
	return int(n), ok
}

func readStats(p *jsonscan.Scanner, st *ChangeStats) bool {
	return p.Fields(statsFields[:], func(f int) bool {
		n, ok := readInt(p)
		*[...]*int{&st.FilesChanged, &st.LinesAdded, &st.LinesDeleted, &st.Hunks, &st.PatchBytes}[f] = n
		return ok
	})
}

// instanceString is the string field of in at index f of instanceFields.
func instanceString(in *Instance, f int) *string {
	switch f {
	case 1:
		return &in.ID
	case 2:
		return &in.Repo
	case 4:
		return &in.BaseCommit
	case 5:
		return &in.MergeCommit
	case 6:
		return &in.CreatedAt
	case 7:
		return &in.ProblemStatement
	case 8:
		return &in.PRTitle
	case 9:
		return &in.PRBody
	case 10:
		return &in.PRUser
	case 11:
		return &in.HeadCommit
	case 15:
		return &in.OraclePatch
	case 17:
		return &in.Language
	case 19:
		return &in.Source
	}
	panic("schemas: instanceString of a non-string field")
}

// decodeInstanceFast is fastInstance for Decode: only into a zero Instance
// (encoding/json merges into what r holds).
func decodeInstanceFast(data []byte, r *Instance) bool {
	if !reflect.ValueOf(r).Elem().IsZero() {
		return false
	}
	in, ok := fastInstance(data)
	if ok {
		*r = in
	}
	return ok
}
