package agentless

import "testing"

// FuzzApply: no model answer makes the edit parser or the application
// panic, and the patch is empty or starts with a diff header.
func FuzzApply(f *testing.F) {
	files := map[string]string{"a.py": "def f(x):\n    return x\n\n\nclass C:\n    y = 1", "b/c.py": "import os\nprint(os.sep)"}
	f.Add("```python\n### a.py\n<<<<<<< SEARCH\n    return x\n=======\n    return x + 1\n>>>>>>> REPLACE\n```")
	f.Add("```python\n### b/c.py\n<<<<<<< SEARCH\nimport os\n=======\nimport os, sys\n>>>>>>> REPLACE\n### a.py\n<<<<<<< SEARCH\n\n=======\nx\n>>>>>>> REPLACE\n```")
	f.Add("```python\n<<<<<<< SEARCH\n=======\n=======\n>>>>>>> REPLACE\n```")
	f.Add("no blocks at all ``` python")
	f.Fuzz(func(t *testing.T, answer string) {
		r := Apply(files, answer)
		if r.ModelPatch != "" && r.ModelPatch != r.RawModelPatch {
			t.Fatalf("model_patch is neither empty nor the raw patch")
		}
		for _, p := range r.EditedFiles {
			if _, ok := files[p]; !ok {
				t.Fatalf("edited a file that was not given: %q", p)
			}
		}
	})
}

// FuzzNormalize: no pair of texts makes NormalizePatch panic.
func FuzzNormalize(f *testing.F) {
	f.Add("def f():\n    '''doc'''\n    return 1", "def f():\n    # c\n    return 2\n\ndef g(): pass")
	f.Add("class A:\n    '''d'''", "class A:\n    '''e'''")
	f.Add("print 'x'", "print 'y'")
	f.Fuzz(func(t *testing.T, old, new string) {
		_, _ = NormalizePatch("p", map[string]string{"m.py": old}, map[string]string{"m.py": new}, []string{"m.py"})
	})
}
