package mining

import (
	"bytes"
	"path"
	"strings"
)

// languages maps a file extension (lower case, with the dot) to the
// programming language it holds.
var languages = map[string]string{
	".go": "Go", ".py": "Python", ".pyi": "Python", ".js": "JavaScript", ".mjs": "JavaScript", ".cjs": "JavaScript",
	".jsx": "JavaScript", ".ts": "TypeScript", ".tsx": "TypeScript", ".java": "Java", ".kt": "Kotlin", ".kts": "Kotlin",
	".scala": "Scala", ".c": "C", ".h": "C", ".cc": "C++", ".cpp": "C++", ".cxx": "C++", ".hpp": "C++", ".hh": "C++",
	".cs": "C#", ".rs": "Rust", ".rb": "Ruby", ".php": "PHP", ".swift": "Swift", ".m": "Objective-C", ".mm": "Objective-C",
	".sh": "Shell", ".bash": "Shell", ".lua": "Lua", ".pl": "Perl", ".pm": "Perl", ".r": "R", ".jl": "Julia",
	".hs": "Haskell", ".ml": "OCaml", ".mli": "OCaml", ".ex": "Elixir", ".exs": "Elixir", ".erl": "Erlang",
	".clj": "Clojure", ".dart": "Dart", ".vue": "Vue", ".svelte": "Svelte", ".sql": "SQL", ".zig": "Zig",
	".fs": "F#", ".groovy": "Groovy", ".cu": "CUDA", ".proto": "Protocol Buffers",
}

// Language returns the programming language of path by its extension, or ""
// for files that are not code (docs, data, configuration).
func Language(p string) string {
	return languages[strings.ToLower(path.Ext(p))]
}

// lockFiles are dependency lock files, by base name.
var lockFiles = map[string]bool{
	"package-lock.json": true, "yarn.lock": true, "pnpm-lock.yaml": true, "go.sum": true, "cargo.lock": true,
	"poetry.lock": true, "pipfile.lock": true, "gemfile.lock": true, "composer.lock": true, "uv.lock": true,
	"mix.lock": true, "pubspec.lock": true, "podfile.lock": true, "flake.lock": true, "bun.lockb": true,
}

// vendoredDirs are path components of vendored, generated or built code.
var vendoredDirs = map[string]bool{
	"vendor": true, "node_modules": true, "third_party": true, "thirdparty": true, "3rdparty": true,
	"dist": true, "build": true, "generated": true, "__generated__": true, ".yarn": true,
}

// IsCode reports whether a change to path counts as a code change: the file
// is in a programming language (Language) and is not a lock file, a
// vendored or built copy (vendor/, node_modules/, third_party/, dist/,
// build/, generated/) or generated code (*.pb.go, *_pb2.py, *.min.js,
// *_generated.*, *.gen.*).
func IsCode(p string) bool {
	if Language(p) == "" {
		return false
	}
	lower := strings.ToLower(p)
	base := path.Base(lower)
	if lockFiles[base] {
		return false
	}
	for _, dir := range strings.Split(path.Dir(lower), "/") {
		if vendoredDirs[dir] {
			return false
		}
	}
	for _, suf := range []string{".pb.go", "_pb2.py", "_pb2_grpc.py", ".min.js", ".pb.cc", ".pb.h"} {
		if strings.HasSuffix(base, suf) {
			return false
		}
	}
	stem := strings.TrimSuffix(base, path.Ext(base))
	return !strings.HasSuffix(stem, "_generated") && !strings.HasSuffix(stem, ".gen") && !strings.HasPrefix(stem, "zz_generated")
}

// binaryWindow is how many leading bytes git looks at for a NUL byte.
const binaryWindow = 8000

// IsBinary reports whether content looks binary the way git decides it: a
// NUL byte in the first 8000 bytes.
func IsBinary(content []byte) bool {
	return bytes.IndexByte(content[:min(len(content), binaryWindow)], 0) >= 0
}

// IsBinaryString is IsBinary of a string.
func IsBinaryString(content string) bool {
	return strings.IndexByte(content[:min(len(content), binaryWindow)], 0) >= 0
}
