package cuda

import (
	"strings"
	"testing"
)

// The environment names keep their documented meanings, and a value a
// variable does not take is an error naming it.
func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{"SWERL_CUDA_MATMUL": "bf16", "SWERL_CUDA_ATTN": "pipe", "SWERL_CUDA_ZERO": "now",
		"SWERL_CUDA_FUSE": "0", "SWERL_CUDA_ACT": "f32", "SWERL_CUDA_PROFILE": "kernels"}
	o, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Matmul: "bf16", Attention: "pipe", EagerZero: true, NoFuse: true, F32Activations: true, Profile: "kernels"}
	if o != want {
		t.Errorf("options %+v, want %+v", o, want)
	}
	if o, err := FromEnv(func(string) string { return "" }); err != nil || o != (Options{}) {
		t.Errorf("no variables: %+v, %v; want the zero value", o, err)
	}
	on := map[string]string{"SWERL_CUDA_ZERO": "lazy", "SWERL_CUDA_FUSE": "1", "SWERL_CUDA_ACT": "bf16", "SWERL_CUDA_PROFILE": "1"}
	if o, err := FromEnv(func(k string) string { return on[k] }); err != nil || o != (Options{Profile: "ops"}) {
		t.Errorf("the on values: %+v, %v", o, err)
	}
	for name, bad := range map[string]string{"SWERL_CUDA_MATMUL": "fp8", "SWERL_CUDA_ATTN": "fast", "SWERL_CUDA_ZERO": "1",
		"SWERL_CUDA_FUSE": "yes", "SWERL_CUDA_ACT": "fp16", "SWERL_CUDA_PROFILE": "all"} {
		if _, err := FromEnv(func(k string) string {
			if k == name {
				return bad
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: err = %v, want one naming the variable", name, bad, err)
		}
	}
	// Attention paths kept only in bench/gpu/kernels are refused, naming
	// the ones the backend has.
	for _, mode := range []string{"strided", "flash", "tc", "naive"} {
		_, err := FromEnv(func(k string) string {
			if k == "SWERL_CUDA_ATTN" {
				return mode
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), "SWERL_CUDA_ATTN") || !strings.Contains(err.Error(), "cublas, mma or pipe") {
			t.Errorf("SWERL_CUDA_ATTN=%s: err = %v, want one naming the variable and cublas, mma or pipe", mode, err)
		}
		if err := (Options{Attention: mode}).validate(); err == nil || !strings.Contains(err.Error(), "cublas, mma or pipe") {
			t.Errorf("Attention %q: validate = %v, want one naming cublas, mma or pipe", mode, err)
		}
	}
	for _, o := range []Options{{Matmul: "fp8"}, {Attention: "fast"}, {Profile: "1"}} {
		if err := o.validate(); err == nil {
			t.Errorf("%+v validated", o)
		}
	}
}
