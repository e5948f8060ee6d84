package main

import (
	"fmt"
	"sort"
	"strings"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// backends maps a --device name to its constructor. The default build knows
// "cpu"; device_cuda.go (build tag cuda) adds "cuda", so nothing in the
// default build links the CUDA driver.
var backends = map[string]func() (gpu.Backend, error){
	"cpu": func() (gpu.Backend, error) { return cpu.New(), nil },
}

// deviceNames lists the devices this binary was built with.
func deviceNames() string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// openBackend returns the compute backend --device names.
func openBackend(name string) (gpu.Backend, error) {
	open := backends[name]
	if open == nil {
		hint := ""
		if name == "cuda" {
			hint = " (this binary was built without CUDA: go build -tags cuda, see scripts/cuda-env.sh)"
		}
		return nil, fmt.Errorf("--device %q: not available in this build; have %s%s", name, deviceNames(), hint)
	}
	return open()
}
