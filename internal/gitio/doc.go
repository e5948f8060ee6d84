// Package gitio reads git repositories through long-lived git processes.
//
// # Behavior
//
// History and per-commit changes stream from one `git log --first-parent
// --raw -z` process ([Log]), or every commit reachable from some refs from
// one `git log -z` ([LogAll]); objects (commits, trees, blobs) come from one
// `git cat-file --batch` process per repository ([CatFile]), which also
// diffs two trees without another process ([CatFile.DiffTrees]); the commit
// graph for merge bases (with each commit's committer and time) is read
// once with `git log --topo-order --reverse` ([ReadGraph]). No process is started per commit.
//
// Real clones can lack objects (partial or damaged clones): a missing object
// is reported as [ErrMissing] so callers can skip the record that needed it,
// count it, and go on.
//
// # Concurrency
//
// A CatFile is safe for concurrent use; requests are serialised on its pipe.
// A LogReader and a Graph are for one goroutine (a Graph is read-only after
// ReadGraph and may then be shared).
package gitio
