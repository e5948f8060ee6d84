package mine

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"

	"swerl/schemas"
)

// Instances cross the dedup GroupByKey as zstd-compressed JSON: source code
// compresses several times over, and the runner copies every byte (Prism
// buffers whole bundles), so the pipeline moves less data and holds less
// memory.
var (
	zOnce sync.Once
	zEnc  *zstd.Encoder
	zDec  *zstd.Decoder
)

func zinit() {
	zOnce.Do(func() {
		var err error
		if zEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1)); err != nil {
			panic("mine: zstd: " + err.Error())
		}
		if zDec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0)); err != nil {
			panic("mine: zstd: " + err.Error())
		}
	})
}

// encodeInstance returns the compressed wire form of inst.
func encodeInstance(inst *schemas.Instance) ([]byte, error) {
	b, err := schemas.Encode(inst)
	if err != nil {
		return nil, err
	}
	zinit()
	return zEnc.EncodeAll(b, make([]byte, 0, len(b)/3)), nil
}

// decodeInstance reverses encodeInstance and also returns the JSON.
func decodeInstance(z []byte) (schemas.Instance, []byte, error) {
	zinit()
	b, err := zDec.DecodeAll(z, nil)
	if err != nil {
		return schemas.Instance{}, nil, fmt.Errorf("mine: decompress instance: %w", err)
	}
	var inst schemas.Instance
	if err := schemas.Decode(b, &inst); err != nil {
		return schemas.Instance{}, nil, err
	}
	return inst, b, nil
}
