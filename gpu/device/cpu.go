package device

import (
	"swerl/gpu"
	"swerl/gpu/cpu"
)

// Every build has "cpu".
func init() {
	register("cpu", func() (gpu.Backend, error) { return cpu.New(), nil })
}
