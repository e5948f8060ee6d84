//go:build cuda

package main

import (
	"swerl/gpu"
	"swerl/gpu/cuda"
)

// The cuda build adds --device cuda.
func init() {
	backends["cuda"] = func() (gpu.Backend, error) { return cuda.New() }
}
