package agentless

import (
	"strings"
	"testing"
)

// FuzzApplyAnswer feeds arbitrary model answers to the repair
// post-processing: it must never panic, a kept patch is the raw patch,
// every edited file is one of the given files, and an answer with no
// ```python fence edits nothing.
func FuzzApplyAnswer(f *testing.F) {
	files := map[string]string{
		"pkg/util.py": "import os\n\n\ndef greet(name):\n    return 'Hello, ' + name",
		"s.py":        "a = 1\nb = 2\n",
	}
	f.Add("```python\n### s.py\n<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n```")
	f.Add("```python\n### pkg/util.py\n<<<<<<< SEARCH\n\n=======\nimport sys\n>>>>>>> REPLACE\n```")
	f.Add("```python\n<<<<<<< SEARCH\nx\n=======\ny\n=======\nz\n>>>>>>> REPLACE\n```")
	f.Add("no edits here")
	f.Fuzz(func(t *testing.T, answer string) {
		r := ApplyAnswer(answer, files, DefaultEngine().Parses)
		if r.ModelPatch != "" && r.ModelPatch != r.RawModelPatch {
			t.Fatalf("model patch differs from raw patch")
		}
		for _, p := range r.EditedFiles {
			if _, ok := files[p]; !ok {
				t.Fatalf("edited a file that was not given: %q", p)
			}
		}
		if !strings.Contains(answer, "```python\n") && len(r.EditedFiles) > 0 {
			t.Fatalf("edited files without a python fence")
		}
	})
}
