// Package prompt builds the SWE-RL repair prompt from an Instance
// (SWE-RL.md §2.1) and the ideal answer to it (OracleAnswer), used for SFT
// warm starts and as a reward sanity check.
//
// The prompt is the reference's: the THINKING_SYSTEM system message and the
// AGENTLESS_REPAIR user message, whose {content} is the "### path\ncontent"
// chunks of the files shown, joined by a blank line. Every file shown is
// returned in Prompt.Files; that map is the code context the reward must be
// given, so an edit to a relevant (unmodified) file scores 0 for that file
// instead of failing as "not found".
//
// File order [U in the paper]: files the oracle modifies first, then the
// other (relevant) files, each group in byte order of path. Caps keep prompts
// short for small models: a file larger than MaxFileBytes is skipped whole
// (never cut, because the reward compares against full contents), files
// that would push the prompt past MaxPromptBytes are skipped, and an issue
// text too long to leave room is cut at a rune boundary. Every skip and cut is
// reported in the Prompt.
package prompt

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"swerl/schemas"
)

// System is the reference's THINKING_SYSTEM prompt.
const System = `A user will ask you to solve a task. You should first draft your thinking process (inner monologue). Then, generate the solution.

Your response format must follow the template below:
<think>
Your thoughts or/and draft, like working through an exercise on scratch paper. Be as casual and as long as you want until you are confident to generate a correct solution.
</think>
<solution>
Final solution presented to the user.
</solution>`

const userHead = "We are currently solving the following issue within our repository. Here is the issue text:\n--- BEGIN ISSUE ---\n"

const userMid = "\n--- END ISSUE ---\n\nBelow are some code segments, each from a relevant file. One or more of these files may contain bugs.\n\n--- BEGIN FILE ---\n```\n"

const userTail = "\n```\n--- END FILE ---\n\n" + EditInstructions

// EditInstructions closes SWE-RL's repair prompt (AGENTLESS_REPAIR): how to
// write SEARCH/REPLACE edits, with the example. Agentless Mini's repair
// prompt ends with the same text.
const EditInstructions = `Please first localize the bug based on the issue statement, and then generate *SEARCH/REPLACE* edits to fix the issue.

Every *SEARCH/REPLACE* edit must use this format:
1. The file path
2. The start of search block: <<<<<<< SEARCH
3. A contiguous chunk of lines to search for in the existing source code
4. The dividing line: =======
5. The lines to replace into the source code
6. The end of the replace block: >>>>>>> REPLACE

Here is an example:

` + "```python" + `
### mathweb/flask/app.py
<<<<<<< SEARCH
from flask import Flask
=======
import math
from flask import Flask
>>>>>>> REPLACE
` + "```" + `

Please note that the *SEARCH/REPLACE* edit REQUIRES PROPER INDENTATION. If you would like to add the line '        print(x)', you must fully write that out, with all those spaces before the code!
Wrap each *SEARCH/REPLACE* edit in a code block as shown in the example above. If you have multiple *SEARCH/REPLACE* edits, use a separate code block for each one.`

// Options caps the prompt. Zero means no cap.
type Options struct {
	MaxFiles       int // at most this many files shown
	MaxFileBytes   int // a file larger than this is skipped
	MaxPromptBytes int // len(System)+len(User) stays at or below this
	// NoSystem leaves Prompt.System empty (the reference's evaluation
	// scaffold sends only the user message).
	NoSystem bool
	// Compact uses a short template and no system message, for small
	// models whose context cannot hold the reference's 1.5 KB of fixed
	// text (a deviation from the paper; see CompactTail). The answer
	// format and the reward are unchanged.
	Compact bool
}

// Compact template parts: the issue, the files, and a one-line reminder of
// the answer format.
const (
	compactHead = "Issue:\n"
	compactMid  = "\n\nCode:\n"
	// CompactTail states the output format in one line.
	CompactTail = "\n\nFix it. Answer <think>...</think> then <solution> with SEARCH/REPLACE edits</solution>."
)

// Prompt is a built prompt and what was left out of it.
type Prompt struct {
	System string
	User   string
	// Files is the code context actually shown: path → full content. Give it
	// to the reward as code_context.
	Files map[string]string
	// Skipped lists "path: reason" for every code_context file not shown.
	Skipped []string
	// IssueCut is how many bytes of the problem statement were cut off.
	IssueCut int
}

// ErrNoRoom is returned when the caps leave room for none of the instance's
// files, or for no issue text.
var ErrNoRoom = errors.New("prompt: caps leave no room")

// Build returns the SWE-RL prompt for in. It fails (the instance is then
// unpromptable and goes to the dead letters) on an invalid instance, or when
// the caps leave room for no file of a non-empty code context.
func Build(in *schemas.Instance, o Options) (Prompt, error) {
	if in == nil {
		return Prompt{}, errors.New("prompt: nil instance")
	}
	if err := in.Validate(); err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	p := Prompt{Files: map[string]string{}}
	head, mid, tail := userHead, userMid, userTail
	if o.Compact {
		head, mid, tail = compactHead, compactMid, CompactTail
	} else if !o.NoSystem {
		p.System = System
	}
	issue := in.ProblemStatement
	if issue == "" {
		issue = strings.TrimSpace(in.PRTitle + "\n\n" + in.PRBody)
	}
	fixed := len(p.System) + len(head) + len(mid) + len(tail)
	if o.MaxPromptBytes > 0 {
		// Leave the issue at most what remains with no file at all, cut at a
		// rune boundary.
		room := o.MaxPromptBytes - fixed
		if room <= 0 {
			return Prompt{}, fmt.Errorf("%w: instance %s: MaxPromptBytes %d is below the fixed prompt text (%d bytes)", ErrNoRoom, in.ID, o.MaxPromptBytes, fixed)
		}
		// The issue may take what the modified files leave, and never less
		// than a quarter of the room.
		budget := room
		for p, c := range in.CodeContext {
			if _, mod := in.OracleNewContent[p]; mod && (o.MaxFileBytes <= 0 || len(c) <= o.MaxFileBytes) {
				budget -= len("### \n\n") + len(p) + len(c)
			}
		}
		budget = max(budget, room/4)
		if len(issue) > budget {
			cut := budget
			for cut > 0 && !utf8.RuneStart(issue[cut]) {
				cut--
			}
			p.IssueCut = len(issue) - cut
			issue = issue[:cut]
		}
	}
	size := fixed + len(issue)
	var chunks []string
	for _, path := range order(in) {
		content := in.CodeContext[path]
		chunk := "### " + path + "\n" + content
		add := len(chunk)
		if len(chunks) > 0 {
			add += 2 // "\n\n" separator
		}
		switch {
		case o.MaxFiles > 0 && len(chunks) >= o.MaxFiles:
			p.Skipped = append(p.Skipped, path+": over MaxFiles")
			continue
		case o.MaxFileBytes > 0 && len(content) > o.MaxFileBytes:
			p.Skipped = append(p.Skipped, fmt.Sprintf("%s: %d bytes over MaxFileBytes", path, len(content)))
			continue
		case o.MaxPromptBytes > 0 && size+add > o.MaxPromptBytes:
			p.Skipped = append(p.Skipped, fmt.Sprintf("%s: %d bytes do not fit MaxPromptBytes", path, len(content)))
			continue
		}
		size += add
		chunks = append(chunks, chunk)
		p.Files[path] = content
	}
	if len(chunks) == 0 && len(in.CodeContext) > 0 {
		return Prompt{}, fmt.Errorf("%w: instance %s: none of its %d files fits (%s)", ErrNoRoom, in.ID, len(in.CodeContext), strings.Join(p.Skipped, "; "))
	}
	p.User = head + issue + mid + strings.Join(chunks, "\n\n") + tail
	return p, nil
}

// order lists code_context paths: the ones the oracle modifies, then the
// rest, each in byte order.
func order(in *schemas.Instance) []string {
	var mod, rel []string
	for _, p := range schemas.SortedPaths(in.CodeContext) {
		if _, ok := in.OracleNewContent[p]; ok {
			mod = append(mod, p)
		} else {
			rel = append(rel, p)
		}
	}
	sort.Strings(mod)
	return append(mod, rel...)
}
