//go:build !linux

package beamrun

import (
	"errors"
	"runtime"
)

// confineToLoopback needs SO_BINDTODEVICE, which only Linux has: Beam's
// Prism takes no bind address, so elsewhere the embedded job service stays
// on every interface and Run refuses to start it unless
// SWERL_PRISM_ALL_INTERFACES=1 says that is accepted.
func confineToLoopback(port int) error {
	return errors.New("SO_BINDTODEVICE (confining a listener to loopback) exists on Linux only, not on " + runtime.GOOS)
}

// BoundDevices reads SO_BINDTODEVICE through /proc, which only Linux has.
func BoundDevices(port int) ([]string, error) {
	return nil, errors.New("reading a listener's bound device needs Linux's /proc and SO_BINDTODEVICE, not available on " + runtime.GOOS)
}
