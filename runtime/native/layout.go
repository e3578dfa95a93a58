package native

import (
	"encoding/binary"
	"fmt"
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Encode writes t's elements in their native layout to dst, which must
// hold Bytes(t.DType, len) bytes.
func Encode(t *tensor.Tensor, dst []byte) error {
	size := t.DType.Size()
	if len(dst) != t.Len()*size {
		return fmt.Errorf("encoding %s%v into %d bytes", t.DType, t.Shape, len(dst))
	}
	le := binary.LittleEndian
	if t.DType == lang.F32 { // the common case, without a switch per element
		for i, v := range t.F {
			le.PutUint32(dst[4*i:], math.Float32bits(float32(v)))
		}
		return nil
	}
	for i := range t.Len() {
		b := dst[i*size:]
		switch t.DType {
		case lang.F64:
			le.PutUint64(b, math.Float64bits(t.F[i]))
		case lang.F16:
			le.PutUint16(b, lang.FloatToF16(t.F[i]))
		case lang.BF16:
			le.PutUint16(b, lang.FloatToBF16(t.F[i]))
		default:
			putInt(b, size, t.I[i])
		}
	}
	return nil
}

func putInt(b []byte, size int, v int64) {
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, uint64(v))
	}
}

// Decode reads a tensor of dtype dt and shape from its native layout.
func Decode(dt lang.DType, shape []int, src []byte) (*tensor.Tensor, error) {
	t := tensor.New(dt, shape)
	size := dt.Size()
	if len(src) != t.Len()*size {
		return nil, fmt.Errorf("decoding %s%v from %d bytes", dt, shape, len(src))
	}
	le := binary.LittleEndian
	if dt == lang.F32 { // the common case, without a switch per element
		for i := range t.F {
			t.F[i] = float64(math.Float32frombits(le.Uint32(src[4*i:])))
		}
		return t, nil
	}
	for i := range t.Len() {
		b := src[i*size:]
		switch dt {
		case lang.F64:
			t.F[i] = math.Float64frombits(le.Uint64(b))
		case lang.F16:
			t.F[i] = lang.F16ToFloat(le.Uint16(b))
		case lang.BF16:
			t.F[i] = lang.BF16ToFloat(le.Uint16(b))
		default:
			t.I[i] = dt.WrapInt(getInt(b, size))
		}
	}
	return t, nil
}

func getInt(b []byte, size int) int64 {
	switch size {
	case 1:
		return int64(b[0])
	case 2:
		return int64(binary.LittleEndian.Uint16(b))
	case 4:
		return int64(binary.LittleEndian.Uint32(b))
	}
	return int64(binary.LittleEndian.Uint64(b))
}
