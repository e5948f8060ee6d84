package cuda

import (
	"fmt"
	"slices"
)

// Options choose how the backend computes; the zero value is the default
// of each. The library reads no environment: cmd/swerl (and the package's
// tests) fill Options from the variables EnvNames lists, through Set, so
// those names keep working for users and device scripts.
type Options struct {
	// Matmul is the matrix products' precision: "f32" (the default),
	// "tf32" or "bf16" (SWERL_CUDA_MATMUL).
	Matmul string
	// Attention is the training attention: "" picks cuBLAS over all heads
	// ("cublas", the exact float32 path), or the mma kernels ("mma") in the
	// bf16 mode; "pipe" is mma with double-buffered tiles, opt-in
	// (SWERL_CUDA_ATTN).
	Attention string
	// EagerZero zeroes a buffer when asked instead of when it is next
	// touched (SWERL_CUDA_ZERO=now).
	EagerZero bool
	// NoFuse turns off the fused kernels: residual add with norm, the
	// paired gate and up product, packed q/k/v (SWERL_CUDA_FUSE=0).
	NoFuse bool
	// F32Activations keeps the activations that only products read in
	// float32 in the bf16 mode (SWERL_CUDA_ACT=f32).
	F32Activations bool
	// Profile is "" (none), "ops" (host time per op, SWERL_CUDA_PROFILE=1)
	// or "kernels" (GPU time per kernel and cuBLAS shape,
	// SWERL_CUDA_PROFILE=kernels).
	Profile string
}

// EnvNames are the environment variables that Set understands.
var EnvNames = []string{"SWERL_CUDA_MATMUL", "SWERL_CUDA_ATTN", "SWERL_CUDA_ZERO", "SWERL_CUDA_FUSE", "SWERL_CUDA_ACT", "SWERL_CUDA_PROFILE"}

var (
	matmulModes    = []string{"f32", "tf32", "bf16"}
	attentionModes = []string{"cublas", "mma", "pipe"}
	// benchAttention are attention paths kept as standalone kernels in
	// bench/gpu/kernels, not in the backend.
	benchAttention = []string{"strided", "flash", "tc", "naive"}
)

// attentionWant is "" for an attention mode the backend has, and otherwise
// what to ask for instead.
func attentionWant(mode string) string {
	switch {
	case slices.Contains(attentionModes, mode):
		return ""
	case slices.Contains(benchAttention, mode):
		return "not in the backend (its kernels are in bench/gpu/kernels); want cublas, mma or pipe"
	}
	return "want cublas, mma or pipe"
}

// Set sets the option that environment variable name stands for from its
// value, as Options documents; an empty value leaves the default.
func (o *Options) Set(name, value string) error {
	if value == "" {
		return nil
	}
	bad := func(want string) error { return fmt.Errorf("cuda: %s=%q: want %s", name, value, want) }
	switch name {
	case "SWERL_CUDA_MATMUL":
		if !slices.Contains(matmulModes, value) {
			return bad("f32, tf32 or bf16")
		}
		o.Matmul = value
	case "SWERL_CUDA_ATTN":
		if want := attentionWant(value); want != "" {
			return fmt.Errorf("cuda: %s=%q: %s", name, value, want)
		}
		o.Attention = value
	case "SWERL_CUDA_ZERO":
		switch value {
		case "lazy", "now":
			o.EagerZero = value == "now"
		default:
			return bad("lazy or now")
		}
	case "SWERL_CUDA_FUSE":
		switch value {
		case "1", "0":
			o.NoFuse = value == "0"
		default:
			return bad("1 or 0")
		}
	case "SWERL_CUDA_ACT":
		switch value {
		case "bf16", "f32":
			o.F32Activations = value == "f32"
		default:
			return bad("bf16 or f32")
		}
	case "SWERL_CUDA_PROFILE":
		switch value {
		case "1":
			o.Profile = "ops"
		case "kernels":
			o.Profile = "kernels"
		default:
			return bad("1 or kernels")
		}
	default:
		return fmt.Errorf("cuda: unknown option variable %s (have %v)", name, EnvNames)
	}
	return nil
}

// FromEnv returns the Options that the variables of EnvNames set, read
// through getenv (os.Getenv in cmd/swerl).
func FromEnv(getenv func(string) string) (Options, error) {
	var o Options
	for _, name := range EnvNames {
		if err := o.Set(name, getenv(name)); err != nil {
			return Options{}, err
		}
	}
	return o, nil
}

// validate checks values set directly, not through Set.
func (o Options) validate() error {
	switch {
	case o.Matmul != "" && !slices.Contains(matmulModes, o.Matmul):
		return fmt.Errorf("cuda: matmul precision %q: want f32, tf32 or bf16", o.Matmul)
	case o.Attention != "" && attentionWant(o.Attention) != "":
		return fmt.Errorf("cuda: attention %q: %s", o.Attention, attentionWant(o.Attention))
	case o.Profile != "" && o.Profile != "ops" && o.Profile != "kernels":
		return fmt.Errorf("cuda: profile %q: want ops or kernels", o.Profile)
	}
	return nil
}
