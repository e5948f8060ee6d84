// Package mining holds the pure rules that turn a merged pull request (or a
// plain commit) into an SWE-RL instance: finding PRs in commit messages,
// linking issues, choosing relevant unmodified files, filtering, and
// deduplicating. Nothing here runs git or Beam; gitio reads repositories and
// pipelines/mine wires these rules into a pipeline.
//
// # Behavior
//
//   - PRs: GitHub merge commits ("Merge pull request #N from owner/branch",
//     [MergeSubject]) and squash merges whose subject ends in "(#N)"
//     ([SquashSubject]).
//   - Linked issues ([LinkedIssues]): "fixes/closes/resolves #N" and their
//     inflections, "owner/repo#N" and https://github.com/owner/repo/issues/N
//     for the same repository.
//   - Filters ([Check]), each with a [Reason]: bot PRs, empty changes,
//     too-large changes ([Limits]), binary files, non-UTF-8 content, changes
//     that touch only non-code files ([IsCode]: docs, lock files, version
//     bumps, generated or vendored paths), decontamination ([Exclude]),
//     identical oracle patches ([Dedup]).
//   - Relevant files ([Relevant]): see RelevantConfig for the ranking and
//     caps.
//
// # Determinism
//
// Every function is deterministic: the same inputs give the same instance,
// byte for byte, whatever the order files were read in.
package mining
