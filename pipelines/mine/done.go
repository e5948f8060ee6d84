package mine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"swerl/sinks/files"
)

// DoneFile is written in DIR/instances, last, when a run has written all
// its instance files. Its absence means the folder holds what a stopped or
// failed run left: some part files of the groups that were finalized (each
// one complete, written atomically) but not all of them. A resumed `swerl
// run` mines again then instead of training on part of the data. Readers
// of Parquet folders skip it (it is not a .parquet file).
const DoneFile = "_SUCCESS"

// done is DoneFile's content: what the run wrote, so that a reader can
// also tell a finished output whose files were since removed.
type done struct {
	Instances int64    `json:"instances"`
	Files     []string `json:"files"` // base names of the part files
}

// donePath is the marker of the instances under out.
func donePath(out string) string { return files.Join(out, "instances", DoneFile) }

// writeDone writes the marker of a finished run (atomically).
func writeDone(ctx context.Context, out string, sum *Summary) error {
	d := done{Instances: sum.Instances, Files: []string{}}
	for _, f := range sum.Files {
		d.Files = append(d.Files, files.Base(f))
	}
	b, _ := json.Marshal(d)
	if err := files.WriteFile(ctx, donePath(out), b); err != nil {
		return fmt.Errorf("mine: %w", err)
	}
	return nil
}

// Finished reports whether out/instances holds the complete output of a
// mining run: its DoneFile, and every part file it names. Instances is how
// many the run kept. A folder without the marker (a run stopped or failed
// part way, or one that never started) is not finished, and no error.
func Finished(ctx context.Context, out string) (ok bool, instances int64, err error) {
	if ok, err := files.Exists(ctx, donePath(out)); err != nil || !ok {
		return false, 0, err
	}
	b, err := files.ReadFile(ctx, donePath(out))
	if errors.Is(err, fs.ErrNotExist) { // removed since
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("mine: %w", err)
	}
	var d done
	if err := json.Unmarshal(b, &d); err != nil {
		// A marker is written atomically; one that does not parse was
		// not written by this package: not a finished output.
		return false, 0, nil
	}
	for _, f := range d.Files {
		if ok, err := files.Exists(ctx, files.Join(out, "instances", f)); err != nil {
			return false, 0, fmt.Errorf("mine: %w", err)
		} else if !ok {
			return false, 0, nil
		}
	}
	return true, d.Instances, nil
}
