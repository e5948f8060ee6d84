// Package device is the one table of the compute devices a binary was
// built with: `swerl … --device NAME` (cmd/swerl) and device=NAME in a
// model: policy spec (gpu/policy) both open their backend here. Each
// device registers itself from its own file: "cpu" always (cpu.go),
// "cuda" under the cuda build tag (cuda.go), so nothing in the default
// build links the CUDA driver.
package device

import (
	"sort"

	"swerl/gpu"
)

// opens maps a device name to its backend's constructor. It is filled by
// the files' init functions and only read after.
var opens = map[string]func() (gpu.Backend, error){}

// register adds a device; a name registered twice is a programming error.
func register(name string, open func() (gpu.Backend, error)) {
	if _, dup := opens[name]; dup {
		panic("device: " + name + " registered twice")
	}
	opens[name] = open
}

// Lookup returns the constructor of the device name, and false when this
// build has no such device.
func Lookup(name string) (open func() (gpu.Backend, error), ok bool) {
	open, ok = opens[name]
	return open, ok
}

// Names lists the devices this build has, sorted.
func Names() []string {
	names := make([]string, 0, len(opens))
	for n := range opens {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
