//go:build !linux

package beamrun

import (
	"errors"
	"runtime"
)

// confineToLoopback is implemented on Linux only (SO_BINDTODEVICE).
func confineToLoopback(port int) error {
	return errors.New("confining a listener to loopback is not implemented on " + runtime.GOOS)
}

// BoundDevices is implemented on Linux only.
func BoundDevices(port int) ([]string, error) {
	return nil, errors.New("not implemented on " + runtime.GOOS)
}
