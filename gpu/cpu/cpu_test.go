package cpu_test

import (
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
