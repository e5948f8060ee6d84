package main

import (
	"flag"

	"swerl/transforms/prompt"
)

// addPromptFlags defines the prompt caps shared by the commands that build
// SWE-RL prompts (train, eval) and returns a function reading them after
// parsing; maxPromptBytes is the command's default cap, why says why it
// is not 0.
func addPromptFlags(fs *flag.FlagSet, maxPromptBytes int, why string) func() prompt.Options {
	section(fs, "Prompt")
	defer endSection(fs)
	maxFiles := fs.Int("max-files", 0, "show at most this many files in a prompt (0: all)")
	maxFileBytes := fs.Int("max-file-bytes", 0, "skip files larger than this in a prompt (0: no cap)")
	maxBytes := fs.Int("max-prompt-bytes", maxPromptBytes, deliberate("cap a prompt at this many bytes (0: no cap)", why))
	return func() prompt.Options {
		return prompt.Options{MaxFiles: *maxFiles, MaxFileBytes: *maxFileBytes, MaxPromptBytes: *maxBytes}
	}
}
