//go:build cuda

package device

import (
	"os"

	"swerl/gpu"
	"swerl/gpu/cuda"
)

// The cuda build adds "cuda", configured by the SWERL_CUDA_* environment
// variables (cuda.EnvNames; docs/gpu.md).
func init() {
	register("cuda", func() (gpu.Backend, error) {
		o, err := cuda.FromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		return cuda.New(o)
	})
}
