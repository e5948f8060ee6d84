package cuda

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"swerl/internal/testenv"
)

// TestMMAEmulated runs the mma.sync flash attention kernels
// (flash_mma.cuh) on the CPU: testdata/mmaemu builds them with g++
// against an emulator that runs each lane as a fiber and implements
// mma.sync from the PTX ISA's fragment layouts, and checks out, lse, dq,
// dk and dv against double-precision attention. It needs no GPU and no cuda tag, so the kernel's
// fragment bookkeeping is checked on every machine; its speed only on a
// GPU (scripts/cuda-device-run.sh).
func TestMMAEmulated(t *testing.T) {
	emulate(t, "flash.cc")
}

// TestRowsEmulated runs attn_rows_gqa (attn_rows.cuh), the ragged
// attention of decoding for GQA heads, on the same emulator against
// double-precision attention.
func TestRowsEmulated(t *testing.T) {
	emulate(t, "rows.cc")
}

// TestPickEmulated runs the greedy picker's kernels (pick.cuh) on the
// emulator against a double-precision scan: ties across the blocks of a
// row, NaN and -inf logits, vocabularies smaller than the blocks a row.
func TestPickEmulated(t *testing.T) {
	emulate(t, "pick.cc")
}

// TestKVEmulated runs rope_kv_rows (attn_rows.cuh), decoding's RoPE and
// cache writes in one launch, on the emulator against the steps done one
// by one.
func TestKVEmulated(t *testing.T) {
	emulate(t, "kv.cc")
}

// emulate builds testdata/mmaemu/src with g++ and runs it; it exits 0
// when every check passed.
func emulate(t *testing.T, src string) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the emulator's fiber switch is x86-64 assembly")
	}
	gxx := testenv.Tool(t, "g++", "apt-get install -y g++")
	bin := filepath.Join(t.TempDir(), "emu")
	src = filepath.Join("testdata", "mmaemu", src)
	if out, err := exec.Command(gxx, "-std=c++20", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("g++ %s: %v\n%s", src, err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("emulated %s: %v", src, err)
	}
}
