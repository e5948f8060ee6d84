//go:build cuda

package cuda

import "gorgonia.org/cu"

// MemUsed returns the device memory in use (total minus free, all
// processes) and the card's total, in bytes.
func (be *Backend) MemUsed() (used, total int64, err error) {
	be.do(func() {
		var free int64
		free, total, err = cu.MemInfo()
		used = total - free
	})
	return used, total, err
}
