package onnx

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// MaxElements bounds the elements of one tensor read from a file: a
// declared shape beyond it is rejected before anything is allocated.
const MaxElements = 1 << 31

// dtypeOf maps ONNX element types to TDL dtypes.
var dtypeOf = map[onnxpb.TensorProto_DataType]lang.DType{
	onnxpb.TensorProto_FLOAT:    lang.F32,
	onnxpb.TensorProto_DOUBLE:   lang.F64,
	onnxpb.TensorProto_FLOAT16:  lang.F16,
	onnxpb.TensorProto_BFLOAT16: lang.BF16,
	onnxpb.TensorProto_INT8:     lang.I8,
	onnxpb.TensorProto_INT16:    lang.I16,
	onnxpb.TensorProto_INT32:    lang.I32,
	onnxpb.TensorProto_INT64:    lang.I64,
	onnxpb.TensorProto_UINT8:    lang.U8,
	onnxpb.TensorProto_UINT16:   lang.U16,
	onnxpb.TensorProto_UINT32:   lang.U32,
	onnxpb.TensorProto_UINT64:   lang.U64,
	onnxpb.TensorProto_BOOL:     lang.Bool,
}

// DType returns the TDL dtype of an ONNX element type.
func DType(elem int32) (lang.DType, error) {
	if nt := narrowTypes[onnxpb.TensorProto_DataType(elem)]; nt != nil {
		return nt.carrier, nil
	}
	dt, ok := dtypeOf[onnxpb.TensorProto_DataType(elem)]
	if !ok {
		return lang.Invalid, fmt.Errorf("element type %s is not supported (TDL has floats, integers and bools; no strings or complex numbers)", onnxpb.TensorProto_DataType(elem))
	}
	return dt, nil
}

// ReadTensorFile reads a serialized TensorProto (a test's input_N.pb or
// output_N.pb).
func ReadTensorFile(path string) (*tensor.Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(data, &tp); err != nil {
		return nil, fmt.Errorf("%s: not a serialized ONNX tensor: %w", path, err)
	}
	t, err := Tensor(&tp, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ReadSequenceFile reads a serialized SequenceProto of tensors (a test's
// input or output that is a sequence).
func ReadSequenceFile(path string) ([]*tensor.Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sp onnxpb.SequenceProto
	if err := proto.Unmarshal(data, &sp); err != nil {
		return nil, fmt.Errorf("%s: not a serialized ONNX sequence: %w", path, err)
	}
	if et := sp.GetElemType(); et != int32(onnxpb.SequenceProto_TENSOR) && et != int32(onnxpb.SequenceProto_UNDEFINED) {
		return nil, fmt.Errorf("%s: a sequence of %s is not supported (only of tensors)", path, onnxpb.SequenceProto_DataType(et))
	}
	out := make([]*tensor.Tensor, len(sp.GetTensorValues()))
	for i, tp := range sp.GetTensorValues() {
		if out[i], err = Tensor(tp, filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("%s: element %d: %w", path, i, err)
		}
	}
	return out, nil
}

// ReadOptionalFile reads a serialized OptionalProto (a test's input or
// output that is an optional): a tensor, a sequence of tensors (isSeq),
// or nothing (present false).
func ReadOptionalFile(path string) (t *tensor.Tensor, seq []*tensor.Tensor, isSeq, present bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, false, false, err
	}
	var op onnxpb.OptionalProto
	if err := proto.Unmarshal(data, &op); err != nil {
		return nil, nil, false, false, fmt.Errorf("%s: not a serialized ONNX optional: %w", path, err)
	}
	switch et := op.GetElemType(); {
	case et == int32(onnxpb.OptionalProto_TENSOR) && op.GetTensorValue() != nil:
		t, err = Tensor(op.GetTensorValue(), filepath.Dir(path))
		return t, nil, false, true, err
	case et == int32(onnxpb.OptionalProto_SEQUENCE) && op.GetSequenceValue() != nil:
		sp := op.GetSequenceValue()
		if et := sp.GetElemType(); et != int32(onnxpb.SequenceProto_TENSOR) && et != int32(onnxpb.SequenceProto_UNDEFINED) {
			return nil, nil, false, false, fmt.Errorf("%s: an optional sequence of %s is not supported (only of tensors)", path, onnxpb.SequenceProto_DataType(et))
		}
		seq = []*tensor.Tensor{}
		for i, tp := range sp.GetTensorValues() {
			e, err := Tensor(tp, filepath.Dir(path))
			if err != nil {
				return nil, nil, false, false, fmt.Errorf("%s: element %d: %w", path, i, err)
			}
			seq = append(seq, e)
		}
		return nil, seq, true, true, nil
	case et == int32(onnxpb.OptionalProto_UNDEFINED) || op.GetTensorValue() == nil && op.GetSequenceValue() == nil:
		return nil, nil, false, false, nil // an empty optional
	default:
		return nil, nil, false, false, fmt.Errorf("%s: an optional of %s is not supported (only of a tensor or a sequence of tensors)", path, onnxpb.OptionalProto_DataType(et))
	}
}

// Tensor converts a TensorProto; dir is where external data files are
// looked up.
func Tensor(tp *onnxpb.TensorProto, dir string) (*tensor.Tensor, error) {
	if nt := narrowTypes[onnxpb.TensorProto_DataType(tp.GetDataType())]; nt != nil {
		shape, n, err := tensorShape(tp.GetDims())
		if err != nil {
			return nil, err
		}
		return decodeNarrow(tp, nt, dir, shape, n)
	}
	dt, err := DType(tp.GetDataType())
	if err != nil {
		return nil, err
	}
	shape, n, err := tensorShape(tp.GetDims())
	if err != nil {
		return nil, err
	}
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		raw, err := externalData(tp, dir, n*dt.Size())
		if err != nil {
			return nil, err
		}
		return decodeRaw(raw, dt, shape)
	}
	if tp.RawData != nil {
		if len(tp.RawData) != n*dt.Size() {
			return nil, fmt.Errorf("raw data has %d bytes, shape %v of %s needs %d", len(tp.RawData), shape, dt, n*dt.Size())
		}
		return decodeRaw(tp.RawData, dt, shape)
	}
	return decodeTyped(tp, dt, shape, n)
}

func tensorShape(dims []int64) ([]int, int, error) {
	shape := make([]int, len(dims))
	n := int64(1)
	for i, d := range dims {
		if d < 0 || d > MaxElements {
			return nil, 0, fmt.Errorf("shape %v has an invalid extent %d", dims, d)
		}
		shape[i] = int(d)
		n *= d
		if n > MaxElements {
			return nil, 0, fmt.Errorf("shape %v has more than %d elements", dims, int64(MaxElements))
		}
	}
	return shape, int(n), nil
}

// externalData reads the bytes of an external-data tensor: location is
// relative to dir and may not leave it; offset and length, when given,
// select a range, which must hold exactly size bytes.
func externalData(tp *onnxpb.TensorProto, dir string, size int) ([]byte, error) {
	var location string
	var offset, length int64 = 0, -1
	for _, kv := range tp.GetExternalData() {
		var err error
		switch kv.GetKey() {
		case "location":
			location = kv.GetValue()
		case "offset":
			offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil || offset < 0 || kv.GetKey() == "length" && length < 0 {
			return nil, fmt.Errorf("external data of %q: bad %s %q", tp.GetName(), kv.GetKey(), kv.GetValue())
		}
	}
	if location == "" {
		return nil, fmt.Errorf("external data of %q has no location", tp.GetName())
	}
	clean := filepath.Clean(location)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("external data of %q: location %q is outside the model's directory", tp.GetName(), location)
	}
	if length < 0 {
		length = int64(size)
	}
	if length != int64(size) {
		return nil, fmt.Errorf("external data of %q has %d bytes, its shape needs %d", tp.GetName(), length, size)
	}
	f, err := os.Open(filepath.Join(dir, clean))
	if err != nil {
		return nil, fmt.Errorf("external data of %q: %w", tp.GetName(), err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < offset+length {
		return nil, fmt.Errorf("external data of %q: %s is shorter than offset %d + length %d", tp.GetName(), location, offset, length)
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, offset); err != nil && err != io.EOF {
		return nil, fmt.Errorf("external data of %q: %w", tp.GetName(), err)
	}
	return buf, nil
}

// decodeRaw decodes little-endian raw bytes, whose length the caller
// checked.
func decodeRaw(raw []byte, dt lang.DType, shape []int) (*tensor.Tensor, error) {
	t := tensor.New(dt, shape)
	size := dt.Size()
	for i := range t.Len() {
		b := raw[i*size : (i+1)*size]
		switch dt {
		case lang.F32:
			t.F[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case lang.F64:
			t.F[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		case lang.F16:
			t.F[i] = lang.F16ToFloat(binary.LittleEndian.Uint16(b))
		case lang.BF16:
			t.F[i] = lang.BF16ToFloat(binary.LittleEndian.Uint16(b))
		case lang.I8, lang.U8, lang.Bool:
			t.I[i] = dt.WrapInt(int64(b[0]))
		case lang.I16, lang.U16:
			t.I[i] = dt.WrapInt(int64(binary.LittleEndian.Uint16(b)))
		case lang.I32, lang.U32:
			t.I[i] = dt.WrapInt(int64(binary.LittleEndian.Uint32(b)))
		case lang.I64, lang.U64:
			t.I[i] = int64(binary.LittleEndian.Uint64(b))
		}
	}
	return t, nil
}

// decodeTyped decodes the typed data fields: float_data (f32), double_data,
// int64_data, uint64_data, and int32_data, which carries every narrower
// integer, bool, and the bits of f16 and bf16.
func decodeTyped(tp *onnxpb.TensorProto, dt lang.DType, shape []int, n int) (*tensor.Tensor, error) {
	var have int
	switch dt {
	case lang.F32:
		have = len(tp.FloatData)
	case lang.F64:
		have = len(tp.DoubleData)
	case lang.I64:
		have = len(tp.Int64Data)
	case lang.U64, lang.U32:
		have = len(tp.Uint64Data)
	default:
		have = len(tp.Int32Data)
	}
	if have != n {
		return nil, fmt.Errorf("tensor %q has %d values, shape %v needs %d", tp.GetName(), have, shape, n)
	}
	t := tensor.New(dt, shape)
	for i := range n {
		switch dt {
		case lang.F32:
			t.F[i] = float64(tp.FloatData[i])
		case lang.F64:
			t.F[i] = tp.DoubleData[i]
		case lang.F16:
			t.F[i] = lang.F16ToFloat(uint16(tp.Int32Data[i]))
		case lang.BF16:
			t.F[i] = lang.BF16ToFloat(uint16(tp.Int32Data[i]))
		case lang.I64:
			t.I[i] = tp.Int64Data[i]
		case lang.U64, lang.U32:
			t.I[i] = dt.WrapInt(int64(tp.Uint64Data[i]))
		default:
			t.I[i] = dt.WrapInt(int64(tp.Int32Data[i]))
		}
	}
	return t, nil
}
