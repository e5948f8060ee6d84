package cpu_test

import (
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gputest"
)

var _ gpu.Backend = (*cpu.Backend[float32])(nil)
var _ gpu.HostBacked = (*cpu.Backend[float32])(nil)
var _ gpu.RaggedAttention = (*cpu.Backend[float32])(nil)

func TestBackend(t *testing.T) { gputest.TestBackend(t, cpu.New()) }

func TestBackendFloat64(t *testing.T) { gputest.TestBackend(t, cpu.NewFloat64()) }

// TestAdamWStepZero: a step count that is not 1-based fails the op with
// an error naming it.
func TestAdamWStepZero(t *testing.T) {
	be := cpu.New()
	defer be.Close()
	bufs := make([]gpu.Buf, 4)
	for i := range bufs {
		b, err := be.Alloc(8)
		if err != nil {
			t.Fatal(err)
		}
		be.Upload(b, []float32{1, 2, 3, 4, 5, 6, 7, 8})
		bufs[i] = b
	}
	be.AdamW(bufs[0], bufs[1], bufs[2], bufs[3], 8, gpu.AdamWParams{LR: 1, Beta1: 0.9, Beta2: 0.95, GradScale: 1})
	err := be.Err()
	if err == nil || !strings.Contains(err.Error(), "adamw") || !strings.Contains(err.Error(), "step 0") {
		t.Fatalf("AdamW at step 0: Err() = %v, want an adamw error naming step 0", err)
	}
}
