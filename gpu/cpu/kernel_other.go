//go:build !amd64 || purego

package cpu

// haveFMA is false: this build has no vector kernels and every matmul runs
// the portable Go kernel.
const haveFMA = false

const haveAVX512 = false

func kern6x16(k int, a, b, c *float32, ldc int) { panic("cpu: no vector kernel in this build") }

func kern8x16z(k int, a, b, c *float32, ldc int) { panic("cpu: no vector kernel in this build") }

func kern4x16z(k int, a, b, c *float32, ldc int) { panic("cpu: no vector kernel in this build") }

func fmaLoop(n int) { panic("cpu: no vector kernel in this build") }

func sdots(n int, q, k *float32, stride, m int, out *float32) {
	panic("cpu: no vector kernel in this build")
}

func saxpys(n int, alpha, x *float32, stride, m int, y *float32) {
	panic("cpu: no vector kernel in this build")
}

func sexpsub(n int, x *float32, sub float32, y *float32) {
	panic("cpu: no vector kernel in this build")
}

func sswiglu(n int, gate, up, out *float32) { panic("cpu: no vector kernel in this build") }
