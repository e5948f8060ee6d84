package main

import (
	"fmt"
	"strings"

	"swerl/gpu"
	"swerl/gpu/device"
)

// deviceNames lists the devices this binary was built with (package
// gpu/device: "cpu", and "cuda" under the cuda build tag).
func deviceNames() string { return strings.Join(device.Names(), ", ") }

// openBackend returns the compute backend --device names.
func openBackend(name string) (gpu.Backend, error) {
	open, ok := device.Lookup(name)
	if !ok {
		hint := ""
		if name == "cuda" {
			hint = " (this binary was built without CUDA: go build -tags cuda, see scripts/cuda-env.sh)"
		}
		return nil, fmt.Errorf("--device %q: not available in this build; have %s%s", name, deviceNames(), hint)
	}
	return open()
}
