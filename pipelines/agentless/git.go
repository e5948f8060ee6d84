package agentless

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// pythonPaths lists the .py files of commit in repo.
func pythonPaths(ctx context.Context, repo, commit string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "ls-tree", "-r", "-z", "--full-tree", "--", commit).Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-tree %s in %s: %w", commit, repo, gitErr(err))
	}
	var paths []string
	for _, e := range bytes.Split(out, []byte{0}) {
		meta, path, ok := strings.Cut(string(e), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[1] != "blob" || !strings.HasSuffix(path, ".py") {
			continue
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// readFiles reads paths at commit in repo with one git cat-file.
func readFiles(ctx context.Context, repo, commit string, paths []string) (map[string]string, error) {
	var names strings.Builder
	for _, p := range paths {
		if strings.ContainsAny(p, "\n") {
			return nil, fmt.Errorf("path %q: newline in a path", p)
		}
		names.WriteString(commit + ":" + p + "\n")
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(names.String())
	data, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git cat-file in %s: %w", repo, gitErr(err))
	}
	files := map[string]string{}
	br := bufio.NewReader(bytes.NewReader(data))
	for _, p := range paths {
		header, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %s: %w", p, err)
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file: %s at %s: %s", p, commit, strings.TrimSpace(header))
		}
		var size int
		if _, err := fmt.Sscan(f[2], &size); err != nil || size < 0 {
			return nil, fmt.Errorf("git cat-file: %s: header %q", p, header)
		}
		buf := make([]byte, size+1)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("git cat-file: %s: %w", p, err)
		}
		files[p] = string(buf[:size])
	}
	return files, nil
}

// gitErr adds git's stderr to an exit error.
func gitErr(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
