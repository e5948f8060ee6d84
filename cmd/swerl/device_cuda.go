//go:build cuda

package main

import (
	"os"

	"swerl/gpu"
	"swerl/gpu/cuda"
)

// The cuda build adds --device cuda, configured by the SWERL_CUDA_*
// environment variables (cuda.EnvNames; docs/gpu.md).
func init() {
	backends["cuda"] = func() (gpu.Backend, error) {
		o, err := cuda.FromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		return cuda.New(o)
	}
}
