package beamrun

import (
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"net"
	"os"
	"strconv"
)

// confineToLoopback finds this process's listening TCP sockets on port
// with a wildcard address (Prism's) and binds each to the loopback device,
// so the kernel hands it only connections that arrive on loopback. It
// fails if it finds none.
func confineToLoopback(port int) error {
	lo, err := loopbackName()
	if err != nil {
		return err
	}
	fds, err := wildcardListeners(port)
	if err != nil {
		return err
	}
	if len(fds) == 0 {
		return fmt.Errorf("no listening socket on port %d found", port)
	}
	for _, fd := range fds {
		if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, lo); err != nil {
			return fmt.Errorf("SO_BINDTODEVICE %s: %w", lo, err)
		}
	}
	return nil
}

// wildcardListeners returns the descriptors of this process's listening
// sockets bound to the unspecified address on port.
func wildcardListeners(port int) ([]int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || on != 1 {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			if a.Port == port && net.IP(a.Addr[:]).IsUnspecified() {
				out = append(out, fd)
			}
		case *unix.SockaddrInet6:
			if a.Port == port && net.IP(a.Addr[:]).IsUnspecified() {
				out = append(out, fd)
			}
		}
	}
	return out, nil
}

// BoundDevices returns, for each listening socket of this process on the
// unspecified address and port, the device it is bound to ("" for none).
// Tests use it to check that Prism's listener is confined.
func BoundDevices(port int) ([]string, error) {
	fds, err := wildcardListeners(port)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, fd := range fds {
		dev, err := unix.GetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE)
		if err != nil {
			return nil, err
		}
		out = append(out, dev)
	}
	return out, nil
}

func loopbackName() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name, nil
		}
	}
	return "", errors.New("no loopback interface")
}
