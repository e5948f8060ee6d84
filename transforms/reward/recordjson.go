package reward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"swerl/internal/jsonscan"
)

// ReadRecords reads the JSONL records of r and calls fn with each, in
// order, with its 1-based line number; blank lines are skipped. A line that
// does not decode (DecodeRecord) reaches fn with its error, prefixed with
// name and the line number, and what of the record could be read (its id).
// It stops at the end of r, at fn's first error, when ctx is done, or at a
// read error (prefixed with name and line number); the end of r is no
// error.
func ReadRecords(ctx context.Context, r io.Reader, name string, fn func(line int64, rec Record, err error) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var long []byte // a line longer than br's buffer, gathered here
	for line := int64(1); ; line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var b []byte
		var err error
		b, long, err = nextLine(br, long)
		if len(bytes.TrimSpace(b)) > 0 {
			rec, derr := DecodeRecord(b)
			if derr != nil {
				derr = fmt.Errorf("%s:%d: %v", name, line, derr)
			}
			if ferr := fn(line, rec, derr); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

// nextLine returns the next line of r with its '\n' (none at the end of
// the input). The line is only valid until the next call: it is r's buffer,
// or long (returned for reuse) when it is longer than that buffer, so most
// lines are decoded without being copied. The decoders copy what they keep.
func nextLine(r *bufio.Reader, long []byte) (line, buf []byte, err error) {
	b, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return b, long, err
	}
	long = append(long[:0], b...)
	for errors.Is(err, bufio.ErrBufferFull) {
		b, err = r.ReadSlice('\n')
		long = append(long, b...)
	}
	return long, long, err
}

// recordWire is a JSONL record with pointer fields, so one decoding tells
// which mode's fields are present.
type recordWire struct {
	ID               string            `json:"id"`
	CodeContext      map[string]string `json:"code_context"`
	OracleNewContent map[string]string `json:"oracle_new_content"`
	Output           *string           `json:"output"`
	OraclePatches    *[]string         `json:"oracle_patches"`
	PredPatches      *[]string         `json:"pred_patches"`
	Mode             string            `json:"mode"`
}

// DecodeRecord decodes one JSONL record (a line of `swerl reward`'s input)
// and checks it names a mode: its mode field, or the fields of one. A
// record that does not decode comes back with its id where that could be
// read, so an error record can name it. b is not kept.
//
// fastRecordWire decodes the usual lines; encoding/json the rest and the
// malformed ones.
func DecodeRecord(b []byte) (Record, error) {
	w, ok := fastRecordWire(b)
	if !ok {
		w = recordWire{}
		if err := json.Unmarshal(b, &w); err != nil {
			// Keep the id when only a field is wrong, so the error record can name it.
			var id struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(b, &id)
			return Record{ID: id.ID}, fmt.Errorf("invalid record: %v", err)
		}
	}
	rec := Record{ID: w.ID, CodeContext: w.CodeContext, OracleNewContent: w.OracleNewContent, ModeName: w.Mode}
	if w.Output != nil {
		rec.Output = *w.Output
	}
	if w.OraclePatches != nil {
		rec.OraclePatches = *w.OraclePatches
	}
	if w.PredPatches != nil {
		rec.PredPatches = *w.PredPatches
	}
	switch {
	case rec.ModeName != "":
	case w.OraclePatches != nil || w.PredPatches != nil:
		rec.ModeName = ModeUnidiff
	case w.Output != nil:
		rec.ModeName = ModeSearchReplace
	default:
		return rec, errors.New("invalid record: want output (search/replace) or oracle_patches/pred_patches (unidiff)")
	}
	return rec, nil
}

// fastRecordWire decodes the common shape of a reward JSONL line in one
// pass: an object whose known fields have their plain types (strings, an
// object of strings, an array of strings) or null, and whose other fields
// are any JSON. It gives up (ok false) on everything else, and the caller
// decodes with encoding/json, which then also words the error: keys that
// only match a field case-insensitively, duplicate fields, escapes naming
// lone surrogates, invalid UTF-8, deep nesting. Where it says ok, the
// result is what json.Unmarshal into recordWire gives.
func fastRecordWire(b []byte) (w recordWire, ok bool) {
	ok = jsonscan.Try(b, func(p *jsonscan.Scanner) bool {
		return p.Fields(recordWireFields[:], func(field int) bool {
			var ok bool
			switch field {
			case fieldID:
				w.ID, ok = p.Str()
			case fieldCodeContext:
				w.CodeContext, ok = p.StrMap()
			case fieldOracleNewContent:
				w.OracleNewContent, ok = p.StrMap()
			case fieldOutput:
				var s string
				s, ok = p.Str()
				w.Output = &s
			case fieldOraclePatches:
				var l []string
				l, ok = p.StrList()
				w.OraclePatches = &l
			case fieldPredPatches:
				var l []string
				l, ok = p.StrList()
				w.PredPatches = &l
			case fieldMode:
				w.Mode, ok = p.Str()
			}
			return ok
		})
	})
	return w, ok
}

// recordWire's fields, as fastRecordWire numbers them.
const (
	fieldID = iota
	fieldCodeContext
	fieldOracleNewContent
	fieldOutput
	fieldOraclePatches
	fieldPredPatches
	fieldMode
	numFields
)

// recordWireFields are recordWire's JSON names, by field number.
var recordWireFields = [numFields]string{
	fieldID:               "id",
	fieldCodeContext:      "code_context",
	fieldOracleNewContent: "oracle_new_content",
	fieldOutput:           "output",
	fieldOraclePatches:    "oracle_patches",
	fieldPredPatches:      "pred_patches",
	fieldMode:             "mode",
}
