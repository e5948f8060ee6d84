package hf

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"swerl/gpu/arch"
	"swerl/internal/atomicfile"
)

// Tensor is one named tensor, row-major, held as float32 whatever its
// on-disk type; the same type as gpu.Tensor.
type Tensor = arch.Tensor

// numel returns the product of shape, or -1 on overflow or a negative dim.
func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/int64(d)) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// TensorInfo describes one tensor of a safetensors file. Begin and End are
// byte offsets into the data section (after the header).
type TensorInfo struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64
}

// maxHeader bounds the JSON header of a safetensors file (the reference
// implementation uses the same limit).
const maxHeader = 100 << 20

// Safetensors is an open safetensors file. Tensors are read on demand with
// ReadAt, so the file is never held in memory whole. It is safe for
// concurrent reads; Close must not race with them.
type Safetensors struct {
	f        io.ReaderAt // an *os.File, or bytes in tests
	path     string
	dataOff  int64 // file offset of the data section
	tensors  []TensorInfo
	byName   map[string]int
	Metadata map[string]string
}

// OpenSafetensors opens path and validates its header against the file:
// known dtypes, non-negative shapes whose element count matches the byte
// range, byte ranges inside the file that tile the data section exactly,
// in the manner of the reference implementation. Nothing is allocated for
// a tensor until its size is known to be backed by the file. Errors name
// the file and the tensor.
func OpenSafetensors(path string) (*Safetensors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hf: %w", err)
	}
	s, err := parseSafetensors(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hf: %s: %w", path, err)
	}
	s.f, s.path = f, path
	return s, nil
}

// parseSafetensors reads and validates the header of a safetensors stream
// of the given size.
func parseSafetensors(r io.ReaderAt, size int64) (*Safetensors, error) {
	var lenBuf [8]byte
	if size < 8 {
		return nil, fmt.Errorf("file of %d bytes is too short for a safetensors header", size)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxHeader || int64(n) > size-8 {
		return nil, fmt.Errorf("header length %d exceeds the file (%d bytes) or the %d byte limit", n, size, maxHeader)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("header is not a JSON object: %w", err)
	}
	s := &Safetensors{f: r, dataOff: 8 + int64(n), byName: map[string]int{}}
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &s.Metadata); err != nil {
				return nil, fmt.Errorf("__metadata__ is not a map of strings: %w", err)
			}
			continue
		}
		var e struct {
			DType       string  `json:"dtype"`
			Shape       []int64 `json:"shape"`
			DataOffsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		dt := DType(e.DType)
		if dt.Size() == 0 {
			return nil, fmt.Errorf("tensor %q: unsupported dtype %q (want F32, F16 or BF16)", name, e.DType)
		}
		if len(e.DataOffsets) != 2 || e.DataOffsets[0] < 0 || e.DataOffsets[1] < e.DataOffsets[0] {
			return nil, fmt.Errorf("tensor %q: invalid data_offsets %v", name, e.DataOffsets)
		}
		if data := size - s.dataOff; e.DataOffsets[1] > data {
			return nil, fmt.Errorf("tensor %q: data_offsets %v reach past the %d byte data section (truncated file)", name, e.DataOffsets, data)
		}
		shape := make([]int, len(e.Shape))
		for i, d := range e.Shape {
			if d < 0 || d > math.MaxInt32 {
				return nil, fmt.Errorf("tensor %q: invalid shape %v", name, e.Shape)
			}
			shape[i] = int(d)
		}
		cnt := numel(shape)
		if cnt < 0 || cnt > math.MaxInt64/8 || cnt*int64(dt.Size()) != e.DataOffsets[1]-e.DataOffsets[0] {
			return nil, fmt.Errorf("tensor %q: shape %v of %s needs %d bytes, data_offsets %v give %d",
				name, shape, dt, cnt*int64(dt.Size()), e.DataOffsets, e.DataOffsets[1]-e.DataOffsets[0])
		}
		s.tensors = append(s.tensors, TensorInfo{Name: name, DType: dt, Shape: shape, Begin: e.DataOffsets[0], End: e.DataOffsets[1]})
	}
	sort.Slice(s.tensors, func(i, j int) bool {
		a, b := s.tensors[i], s.tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	pos := int64(0)
	for i, t := range s.tensors {
		if t.Begin != pos {
			return nil, fmt.Errorf("tensor %q: data starts at %d, want %d (overlap or hole)", t.Name, t.Begin, pos)
		}
		pos = t.End
		s.byName[t.Name] = i
	}
	if data := size - s.dataOff; pos != data {
		return nil, fmt.Errorf("tensors cover %d bytes of a %d byte data section (truncated or padded file)", pos, data)
	}
	return s, nil
}

// Tensors returns the tensors of the file in data order. The slice must not
// be modified.
func (s *Safetensors) Tensors() []TensorInfo { return s.tensors }

// Info returns the description of the named tensor.
func (s *Safetensors) Info(name string) (TensorInfo, bool) {
	i, ok := s.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return s.tensors[i], true
}

// ReadFloat32 reads the named tensor converted to float32 into dst (grown
// as needed) and returns it. The file is read in chunks, so memory beyond
// dst stays small.
func (s *Safetensors) ReadFloat32(name string, dst []float32) ([]float32, error) {
	t, ok := s.Info(name)
	if !ok {
		return dst, fmt.Errorf("hf: %s: no tensor %q", s.path, name)
	}
	n := int(numel(t.Shape))
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	es := t.DType.Size()
	const chunk = 1 << 20
	buf := make([]byte, min(chunk, n*es))
	for done := 0; done < n; {
		k := min(len(buf)/es, n-done)
		b := buf[:k*es]
		if _, err := s.f.ReadAt(b, s.dataOff+t.Begin+int64(done*es)); err != nil {
			return dst, fmt.Errorf("hf: %s: read tensor %q: %w", s.path, name, err)
		}
		decode(dst[done:done+k], b, t.DType)
		done += k
	}
	return dst, nil
}

func decode(dst []float32, b []byte, dt DType) {
	switch dt {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
}

func encode(b []byte, src []float32, dt DType) {
	switch dt {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(b[2*i:], Float32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(b[2*i:], Float32ToBF16(v))
		}
	}
}

// Close closes the file.
func (s *Safetensors) Close() error {
	if c, ok := s.f.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// WriteSafetensors writes tensors to path atomically, converted to dt, in
// the given order, with metadata (format "pt" is added when absent:
// transformers refuses files without it). The JSON header is padded with
// spaces to a multiple of 8 bytes so that every tensor is aligned.
func WriteSafetensors(path string, tensors []Tensor, dt DType, metadata map[string]string) error {
	if dt.Size() == 0 {
		return fmt.Errorf("hf: write %s: unsupported dtype %q", path, dt)
	}
	hdr, err := safetensorsHeader(tensors, dt, metadata)
	if err != nil {
		return fmt.Errorf("hf: write %s: %w", path, err)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	defer f.Abort()
	w := bufio.NewWriterSize(f, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	w.Write(lenBuf[:])
	w.Write(hdr)
	buf := make([]byte, 64<<10)
	for _, t := range tensors {
		per := len(buf) / dt.Size()
		for i := 0; i < len(t.Data); i += per {
			part := t.Data[i:min(i+per, len(t.Data))]
			b := buf[:len(part)*dt.Size()]
			encode(b, part, dt)
			if _, err := w.Write(b); err != nil {
				return fmt.Errorf("hf: write %s: %w", path, err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("hf: write %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	return nil
}

func safetensorsHeader(tensors []Tensor, dt DType, metadata map[string]string) ([]byte, error) {
	meta := map[string]string{"format": "pt"}
	for k, v := range metadata {
		meta[k] = v
	}
	type entry struct {
		DType       DType    `json:"dtype"`
		Shape       []int    `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	h := map[string]any{"__metadata__": meta}
	off := int64(0)
	for _, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" {
			return nil, fmt.Errorf("invalid tensor name %q", t.Name)
		}
		if _, dup := h[t.Name]; dup {
			return nil, fmt.Errorf("duplicate tensor %q", t.Name)
		}
		if n := numel(t.Shape); n != int64(len(t.Data)) {
			return nil, fmt.Errorf("tensor %q: shape %v holds %d elements, data has %d", t.Name, t.Shape, n, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		end := off + int64(len(t.Data)*dt.Size())
		h[t.Name] = entry{DType: dt, Shape: shape, DataOffsets: [2]int64{off, end}}
		off = end
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	return hdr, nil
}

// errNotFound reports a missing weights file in a model directory.
var errNotFound = errors.New("no model.safetensors or model.safetensors.index.json")
