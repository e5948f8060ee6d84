package reward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"swerl/internal/jsonscan/jsonscantest"
	"swerl/internal/testenv"
)

// conformanceFiles are the shared reward conformance corpus.
var conformanceFiles = []string{"reward_search_replace.jsonl", "reward_unidiff.jsonl"}

// conformanceLines returns the lines of a conformance file as they are,
// without their newlines.
func conformanceLines(t testing.TB, name string) [][]byte {
	t.Helper()
	b := bytes.TrimSuffix(testenv.ReadConformance(t, name), []byte("\n"))
	return bytes.Split(b, []byte("\n"))
}

// checkFastWire: where fastRecordWire decodes b, json.Unmarshal accepts b
// and gives the same recordWire.
func checkFastWire(t *testing.T, b []byte) bool {
	t.Helper()
	return jsonscantest.Agrees(t, b, fastRecordWire, jsonscantest.Unmarshal[recordWire])
}

func TestFastRecordWire(t *testing.T) {
	accept := []string{
		`{}`,
		` {"id":"a","output":"x\n\"y\"\\\/\b\f\r\tz","mode":"m"} ` + "\n",
		`{"id":"\u00e9\u65e5\ud83d\ude00é日😀","code_context":{"a.py":"1\n","b\u00e9":""},"oracle_new_content":{}}`,
		`{"oracle_patches":[],"pred_patches":["p","q\u0041"]}`,
		`{"expected_reward":-0.25e+3,"kind":"x","n":[1,0.5,true,false,null,{"a":[{}]},[]],"z":{"k":"v"},"id":"i","output":""}`,
		`{"id":"a","extra":null,"output":"o"}`,
		`{"id":null,"pred_patches":null,"output":null,"code_context":null}`,
	}
	for _, s := range accept {
		if !checkFastWire(t, []byte(s)) {
			t.Errorf("%s: fast decoder gave up", s)
		}
	}
	// Left to encoding/json: valid with other semantics, or malformed.
	giveUp := []string{
		`{"ID":"a"}`, `{"id":"a","id":"b"}`, `{"output":"\ud83d"}`,
		`{"output":"\udc00x"}`, "{\"output\":\"\xff\"}", `{"output":"a` + "\x01" + `"}`,
		`{"code_context":{"a":null}}`, `{"pred_patches":[null]}`, `{"id":1}`,
		`{"id":"a"} x`, `{"id":"a",}`, `{"x":01}`, `{"x":1.}`, `{"x":-}`, `{"x":tru}`,
		`{"output":"\x"}`, `{"output":"\u12"}`, `{"id":"a"`, `[]`, ``,
	}
	for _, s := range giveUp {
		if checkFastWire(t, []byte(s)) {
			t.Errorf("%s: fast decoder did not give up", s)
		}
	}
}

// TestFastRecordWireConformance: every line of the shared corpus takes the
// fast path and decodes as encoding/json decodes it.
func TestFastRecordWireConformance(t *testing.T) {
	for _, name := range conformanceFiles {
		for i, line := range conformanceLines(t, name) {
			if !checkFastWire(t, line) {
				t.Errorf("%s:%d: fast decoder gave up", name, i+1)
			}
		}
	}
}

func FuzzFastRecordWire(f *testing.F) {
	f.Add([]byte(`{"id":"a","output":"x\n\u00e9\ud83d\ude00","code_context":{"a":"b"},"k":[1,{"z":null}]}`))
	f.Add([]byte(`{"oracle_patches":["a"],"pred_patches":[],"mode":"unidiff","e":-1.5E-2}`))
	f.Add([]byte(`{"Output":"x","id":"\udc00"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastWire(t, b)
	})
}

// DecodeRecord names the mode a record asks for, keeps the id of a record
// with a wrong field, and refuses a record that names no mode.
func TestDecodeRecord(t *testing.T) {
	for _, c := range []struct{ line, id, mode, err string }{
		{`{"id":"a","output":"o"}`, "a", ModeSearchReplace, ""},
		{`{"id":"b","pred_patches":[]}`, "b", ModeUnidiff, ""},
		{`{"id":"c","output":"o","mode":"unidiff"}`, "c", ModeUnidiff, ""},
		{`{"id":"d","output":7}`, "d", "", "invalid record: json: cannot unmarshal number"},
		{`{"id":"e"}`, "e", "", "invalid record: want output (search/replace) or oracle_patches/pred_patches (unidiff)"},
		{`{"id":`, "", "", "invalid record: unexpected end of JSON input"},
	} {
		rec, err := DecodeRecord([]byte(c.line))
		if rec.ID != c.id || c.err == "" && (err != nil || rec.ModeName != c.mode) || c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)) {
			t.Errorf("%s: %+v, %v; want id %q, mode %q, error %q", c.line, rec, err, c.id, c.mode, c.err)
		}
	}
}

// BenchmarkDecodeRecord decodes every line of the shared corpus once per
// iteration: the fast path, as `swerl reward` reads its JSONL.
func BenchmarkDecodeRecord(b *testing.B) {
	var lines [][]byte
	n := 0
	for _, name := range conformanceFiles {
		for _, l := range conformanceLines(b, name) {
			lines = append(lines, l)
			n += len(l)
		}
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		for _, l := range lines {
			if _, err := DecodeRecord(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestNextLine reads lines shorter than, as long as and longer than the
// reader's buffer, with and without a final newline, and checks each comes
// back whole and in order although the buffers are reused between calls.
func TestNextLine(t *testing.T) {
	const size = 16 // bufio's smallest buffer
	var lines []string
	for _, n := range []int{0, 1, size - 2, size - 1, size, size + 1, 3*size + 5, 40, 1} {
		lines = append(lines, strings.Repeat(string(rune('a'+len(lines))), n)+"\n")
	}
	for _, last := range []string{"", "tail without newline", strings.Repeat("z", 5*size)} {
		in := strings.Join(lines, "") + last
		want := strings.SplitAfter(in, "\n")
		if want[len(want)-1] == "" {
			want = want[:len(want)-1]
		}
		r := bufio.NewReaderSize(strings.NewReader(in), size)
		var long []byte
		var got []string
		for {
			b, buf, err := nextLine(r, long)
			long = buf
			if len(b) > 0 {
				got = append(got, string(b))
			}
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatal(err)
				}
				break
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("last %q: got %q, want %q", last, got, want)
		}
	}
}

// TestReadRecordsKeepsNoBuffer decodes records, some longer than the 1 MiB
// read buffer and with escapes, keeps them all, and only then checks each
// against json.Unmarshal of its line: a record that pointed into the
// reused line buffers would have been overwritten by later lines.
func TestReadRecordsKeepsNoBuffer(t *testing.T) {
	var lines [][]byte
	for i, n := range []int{10, 300 << 10, 10, 1 << 20, 3 << 20, 7, 2 << 20} {
		body := strings.Repeat(fmt.Sprintf("line %d \"q\" \\ é\t\n", i), n/20+1)
		rec := map[string]any{
			"id":                 fmt.Sprintf("r%d", i),
			"code_context":       map[string]string{"a.py": body},
			"oracle_new_content": map[string]string{"a.py": body + "x\n"},
			"output":             "<think>t</think>\n<solution>\n```python\n### a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n</solution>",
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, b)
	}
	in := bytes.NewReader(append(bytes.Join(lines, []byte("\n")), '\n'))
	var got []Record
	err := ReadRecords(context.Background(), in, "in", func(_ int64, rec Record, err error) error {
		if err != nil {
			t.Errorf("record %d: %v", len(got), err)
		}
		got = append(got, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(lines) {
		t.Fatalf("%d records, want %d", len(got), len(lines))
	}
	for i, b := range lines {
		var want recordWire
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		g := got[i]
		if g.ID != want.ID || g.Output != *want.Output || g.CodeContext["a.py"] != want.CodeContext["a.py"] || g.OracleNewContent["a.py"] != want.OracleNewContent["a.py"] {
			t.Errorf("record %d (%d bytes) differs from its line", i, len(b))
		}
	}
}

// ReadRecords numbers the lines it reads, blank ones included, and words a
// line that does not decode with the input's name and the line.
func TestReadRecordsLines(t *testing.T) {
	in := "{\"id\":\"a\",\"output\":\"o\"}\n\n  \n{\"id\":\"b\",\"output\":1}\n{\"id\":\"c\",\"pred_patches\":[]}"
	var got []string
	err := ReadRecords(context.Background(), strings.NewReader(in), "f.jsonl", func(line int64, rec Record, err error) error {
		got = append(got, fmt.Sprintf("%d %s %v", line, rec.ID, err != nil && strings.HasPrefix(err.Error(), fmt.Sprintf("f.jsonl:%d: invalid record: ", line))))
		return nil
	})
	if want := []string{"1 a false", "4 b true", "5 c false"}; err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}
