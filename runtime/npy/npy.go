package npy

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"tofuc/lang"
	"tofuc/runtime/native"
	"tofuc/runtime/safefile"
	"tofuc/runtime/tensor"
)

const (
	magic         = "\x93NUMPY"
	maxHeaderLen  = 1 << 20
	headerAlign   = 64
	maxV1Header   = math.MaxUint16
	maxAllocChunk = 1 << 20
)

// header is a parsed .npy header.
type header struct {
	dtype lang.DType
	order binary.ByteOrder
	shape []int
	count int // product of shape
	size  int // bytes per element
}

// Vet checks an array's header before its data is read or any of it
// allocated: its name (an .npz member's, without ".npy"; "" for a .npy
// file), dtype and shape. An error refuses the array, and its file.
type Vet func(name string, dt lang.DType, shape []int) error

// source is where an array is read from: r, which holds size bytes (-1:
// unknown). whole says the array is all of them (a file, an .npz
// member), trusted that size is known to be right (a file's, not one
// the input itself declares).
type source struct {
	r              io.Reader
	size           int64
	whole, trusted bool
}

// Read reads one .npy array from r, consuming exactly its bytes.
func Read(r io.Reader) (*tensor.Tensor, error) {
	src := source{r: r, size: -1}
	switch b := r.(type) {
	case *bytes.Reader:
		src.size, src.trusted = int64(b.Len()), true
	case *bytes.Buffer:
		src.size, src.trusted = int64(b.Len()), true
	case *strings.Reader:
		src.size, src.trusted = int64(b.Len()), true
	}
	return read(src, "", nil, &budget{}) // unbounded: the data is what r delivers
}

// ReadFile reads the .npy file at path.
func ReadFile(path string) (*tensor.Tensor, error) { return ReadFileVetted(path, nil) }

// ReadFileVetted reads the .npy file at path, which must be a regular
// file whose data is exactly what its header declares, after vet (nil:
// none) has accepted its header.
func ReadFileVetted(path string, vet Vet) (*tensor.Tensor, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	t, err := read(source{r: bufio.NewReader(f), size: st.Size(), whole: true, trusted: true}, "", vet, newBudget())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// read reads an array named name (for vet) from src, within the memory
// budget b.
func read(src source, name string, vet Vet, b *budget) (*tensor.Tensor, error) {
	h, hlen, err := readHeader(src.r)
	if err != nil {
		return nil, err
	}
	if vet != nil {
		if err := vet(name, h.dtype, h.shape); err != nil {
			return nil, err
		}
	}
	nbytes := int64(h.count) * int64(h.size) // readHeader bounds count*size
	if src.size >= 0 {
		rest := max(src.size-int64(hlen), 0)
		switch {
		case nbytes > rest:
			return nil, fmt.Errorf("npy: shape %v of %s needs %d bytes of data but only %d are present", h.shape, h.dtype, nbytes, rest)
		case src.whole && nbytes < rest:
			return nil, fmt.Errorf("npy: shape %v of %s is %d bytes of data, but %d follow the header", h.shape, h.dtype, nbytes, rest)
		}
	}
	if err := b.take(h); err != nil {
		return nil, err
	}
	data, err := readData(src.r, nbytes, src.trusted)
	if err != nil {
		return nil, err
	}
	return decode(h, data), nil
}

// budget is the memory the arrays of one file may still take: what this
// machine has available (native.AvailableMemory), less what the arrays
// read before took; unbounded where that cannot be known.
type budget struct {
	left  int64
	known bool
}

func newBudget() *budget {
	left, known := native.AvailableMemory()
	return &budget{left: left, known: known}
}

// take counts an array against the budget, refusing one that does not
// fit: its data as read, and the tensor it becomes.
func (b *budget) take(h *header) error {
	if !b.known {
		return nil
	}
	need, ok := lang.MulInt64(int64(h.count), int64(h.size)+tensor.ElementBytes)
	if !ok {
		need = math.MaxInt64
	}
	if need > b.left {
		return fmt.Errorf("npy: shape %v of %s needs about %s of memory, more than the %s available", h.shape, h.dtype, lang.FormatBytes(need), lang.FormatBytes(b.left))
	}
	b.left -= need
	return nil
}

// readData reads exactly n bytes. When trusted is set the caller has
// checked that n bytes are available and the buffer is allocated at once;
// otherwise it grows only as bytes arrive.
func readData(r io.Reader, n int64, trusted bool) ([]byte, error) {
	if trusted {
		buf := make([]byte, n)
		if m, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("npy: truncated data: got %d of %d bytes", m, n)
			}
			return nil, fmt.Errorf("npy: reading data: %w", err)
		}
		return buf, nil
	}
	var buf bytes.Buffer
	buf.Grow(int(min(n, maxAllocChunk)))
	m, err := io.Copy(&buf, io.LimitReader(r, n))
	if err != nil {
		return nil, fmt.Errorf("npy: reading data: %w", err)
	}
	if m < n {
		return nil, fmt.Errorf("npy: truncated data: got %d of %d bytes", m, n)
	}
	return buf.Bytes(), nil
}

// readHeader reads the magic, version and header dict; it returns the
// header and the number of bytes consumed.
func readHeader(r io.Reader) (*header, int, error) {
	var pre [8]byte
	if n, err := io.ReadFull(r, pre[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, 0, errors.New("npy: empty input")
		}
		return nil, 0, errors.New("npy: truncated preamble")
	}
	if string(pre[:6]) != magic {
		return nil, 0, errors.New("npy: not a .npy file (bad magic string)")
	}
	major, minor := pre[6], pre[7]
	var hlen, consumed int
	switch major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, 0, errors.New("npy: truncated header length")
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
		consumed = 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, 0, errors.New("npy: truncated header length")
		}
		l := binary.LittleEndian.Uint32(b[:])
		if l > maxHeaderLen {
			return nil, 0, fmt.Errorf("npy: header length %d exceeds the limit of %d bytes", l, maxHeaderLen)
		}
		hlen = int(l)
		consumed = 12
	default:
		return nil, 0, fmt.Errorf("npy: unsupported format version %d.%d", major, minor)
	}
	if minor != 0 {
		return nil, 0, fmt.Errorf("npy: unsupported format version %d.%d", major, minor)
	}
	text, err := readData(r, int64(hlen), false)
	if err != nil {
		return nil, 0, errors.New("npy: truncated header")
	}
	h, err := parseHeader(string(text))
	if err != nil {
		return nil, 0, err
	}
	return h, consumed + hlen, nil
}

// parseHeader parses the Python dict literal of a .npy header.
func parseHeader(s string) (*header, error) {
	p := &pyParser{s: s}
	v, err := p.value()
	if err != nil {
		return nil, fmt.Errorf("npy: malformed header: %w", err)
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("npy: malformed header: unexpected %q after the dict", p.rest())
	}
	d, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("npy: malformed header: not a dict")
	}
	for k := range d {
		if k != "descr" && k != "fortran_order" && k != "shape" {
			return nil, fmt.Errorf("npy: unexpected header key %q", k)
		}
	}
	descr, ok := d["descr"].(string)
	if !ok {
		return nil, errors.New("npy: header has no string 'descr'")
	}
	fortran, ok := d["fortran_order"].(bool)
	if !ok {
		return nil, errors.New("npy: header has no bool 'fortran_order'")
	}
	if fortran {
		return nil, errors.New("npy: Fortran-order arrays are not supported (save the array in C order, e.g. with numpy.ascontiguousarray)")
	}
	tup, ok := d["shape"].(tuple)
	if !ok {
		return nil, errors.New("npy: header has no tuple 'shape'")
	}
	h := &header{}
	if err := h.setDescr(descr); err != nil {
		return nil, err
	}
	zero := false
	for _, x := range tup {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("npy: shape entry %v is not an integer", x)
		}
		if n < 0 {
			return nil, fmt.Errorf("npy: negative extent %d in shape", n)
		}
		if n > math.MaxInt32*int64(math.MaxInt32) {
			return nil, fmt.Errorf("npy: extent %d in shape is too large", n)
		}
		zero = zero || n == 0
		h.shape = append(h.shape, int(n))
	}
	// count*size must fit an int64 (and an int) to be checked against the
	// bytes available.
	const limit = math.MaxInt64 / 8
	count := int64(1)
	for _, n := range h.shape {
		if zero {
			count = 0
			break
		}
		if count > limit/int64(n) {
			return nil, fmt.Errorf("npy: shape %v has too many elements", h.shape)
		}
		count *= int64(n)
	}
	if int64(int(count)) != count {
		return nil, fmt.Errorf("npy: shape %v has too many elements", h.shape)
	}
	h.count = int(count)
	return h, nil
}

var descrTypes = map[string]lang.DType{
	"f2": lang.F16, "f4": lang.F32, "f8": lang.F64,
	"i1": lang.I8, "i2": lang.I16, "i4": lang.I32, "i8": lang.I64,
	"u1": lang.U8, "u2": lang.U16, "u4": lang.U32, "u8": lang.U64,
	"b1": lang.Bool,
}

// descrOf is the NumPy type string of a dtype, little-endian ('|' for
// single bytes, as NumPy writes them).
func descrOf(dt lang.DType) string {
	for code, d := range descrTypes {
		if d == dt {
			if dt.Size() == 1 {
				return "|" + code
			}
			return "<" + code
		}
	}
	return ""
}

func (h *header) setDescr(d string) error {
	if len(d) != 3 {
		return fmt.Errorf("npy: unsupported dtype %q", d)
	}
	dt, ok := descrTypes[d[1:]]
	if !ok {
		return fmt.Errorf("npy: unsupported dtype %q (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)", d)
	}
	switch d[0] {
	case '<', '|', '=':
		h.order = binary.LittleEndian
	case '>':
		h.order = binary.BigEndian
	default:
		return fmt.Errorf("npy: unsupported byte order in dtype %q", d)
	}
	h.dtype = dt
	h.size = dt.Size()
	return nil
}

// decode converts len(data) == count*size bytes to a tensor.
func decode(h *header, data []byte) *tensor.Tensor {
	t := tensor.New(h.dtype, h.shape)
	o := h.order
	for i := 0; i < h.count; i++ {
		b := data[i*h.size:]
		switch h.dtype {
		case lang.F16:
			t.F[i] = lang.F16ToFloat(o.Uint16(b))
		case lang.F32:
			t.F[i] = float64(math.Float32frombits(o.Uint32(b)))
		case lang.F64:
			t.F[i] = math.Float64frombits(o.Uint64(b))
		case lang.I8:
			t.I[i] = int64(int8(b[0]))
		case lang.I16:
			t.I[i] = int64(int16(o.Uint16(b)))
		case lang.I32:
			t.I[i] = int64(int32(o.Uint32(b)))
		case lang.I64, lang.U64:
			t.I[i] = int64(o.Uint64(b))
		case lang.U8:
			t.I[i] = int64(b[0])
		case lang.U16:
			t.I[i] = int64(o.Uint16(b))
		case lang.U32:
			t.I[i] = int64(o.Uint32(b))
		case lang.Bool:
			if b[0] != 0 {
				t.I[i] = 1
			}
		}
	}
	return t
}

// Write writes t to w as a .npy array.
func Write(w io.Writer, t *tensor.Tensor) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	dt := Stored(t.DType)
	descr := descrOf(dt)
	var sb strings.Builder
	sb.WriteString("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (")
	for i, d := range t.Shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(d))
	}
	if len(t.Shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	hdr := sb.String()
	pre := 10
	if len(hdr)+1+pre > maxV1Header {
		pre = 12
	}
	pad := (headerAlign - (pre+len(hdr)+1)%headerAlign) % headerAlign
	hdr += strings.Repeat(" ", pad) + "\n"
	var out bytes.Buffer
	out.WriteString(magic)
	if pre == 10 {
		out.Write([]byte{1, 0})
		out.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(hdr))))
	} else {
		out.Write([]byte{2, 0})
		out.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(hdr))))
	}
	out.WriteString(hdr)
	if _, err := w.Write(out.Bytes()); err != nil {
		return err
	}
	n := t.Len()
	buf := make([]byte, 0, min(n*dt.Size(), maxAllocChunk))
	for i := 0; i < n; i++ {
		buf = appendElement(buf, dt, t, i)
		if len(buf)+8 > cap(buf) || i == n-1 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return nil
}

// appendElement appends element i of t, little-endian, as dtype dt
// (t's, or Stored's).
func appendElement(buf []byte, dt lang.DType, t *tensor.Tensor, i int) []byte {
	le := binary.LittleEndian
	switch dt {
	case lang.F16:
		return le.AppendUint16(buf, lang.FloatToF16(t.F[i]))
	case lang.F32:
		return le.AppendUint32(buf, math.Float32bits(float32(t.F[i])))
	case lang.F64:
		return le.AppendUint64(buf, math.Float64bits(t.F[i]))
	case lang.I8, lang.U8, lang.Bool:
		return append(buf, byte(t.I[i]))
	case lang.I16, lang.U16:
		return le.AppendUint16(buf, uint16(t.I[i]))
	case lang.I32, lang.U32:
		return le.AppendUint32(buf, uint32(t.I[i]))
	case lang.I64, lang.U64:
		return le.AppendUint64(buf, uint64(t.I[i]))
	}
	return buf
}

// Raw arrays: a tensor's elements in row-major order, little-endian, as
// its Stored dtype, with no header (what a NumPy array's buffer holds;
// the Python package hands them over in place, docs/python.md).

// RawBytes is the length of t's raw array.
func RawBytes(t *tensor.Tensor) int { return t.Len() * Stored(t.DType).Size() }

// EncodeRaw writes t's raw array into dst, which must hold RawBytes(t).
func EncodeRaw(dst []byte, t *tensor.Tensor) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	if len(dst) != RawBytes(t) {
		return fmt.Errorf("npy: %d bytes for a raw %s%v array of %d", len(dst), t.DType, t.Shape, RawBytes(t))
	}
	dt := Stored(t.DType)
	buf := dst[:0]
	for i := range t.Len() {
		buf = appendElement(buf, dt, t, i)
	}
	return nil
}

// DecodeRaw reads a raw array of dtype dt (one NumPy has: not bf16) and
// shape from data, which must hold exactly its elements.
func DecodeRaw(dt lang.DType, shape []int, data []byte) (*tensor.Tensor, error) {
	if descrOf(dt) == "" {
		return nil, fmt.Errorf("npy: no raw arrays of %s", dt)
	}
	if err := tensor.CheckSize(shape); err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	h := &header{dtype: dt, shape: shape, order: binary.LittleEndian, size: dt.Size(), count: tensor.NumElements(shape)}
	if len(data) != h.count*h.size {
		return nil, fmt.Errorf("npy: %d bytes for a raw %s%v array of %d", len(data), dt, shape, h.count*h.size)
	}
	return decode(h, data), nil
}

// WriteFile writes t to the .npy file at path.
func WriteFile(path string, t *tensor.Tensor) error {
	return createWith(path, func(w io.Writer) error { return Write(w, t) })
}

// createWith writes the file at path with write, whole or not at all
// (safefile).
func createWith(path string, write func(io.Writer) error) error {
	return safefile.Write(path, 0o644, write)
}

// ReadNPZ reads every array of the .npz file at path, keyed by name.
func ReadNPZ(path string) (map[string]*tensor.Tensor, error) { return ReadNPZVetted(path, nil) }

// ReadNPZVetted reads every array of the .npz file at path, which must
// be a regular file, keyed by name, after vet (nil: none) has accepted
// its header: an array it refuses is not read.
func ReadNPZVetted(path string, vet Vet) (map[string]*tensor.Tensor, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := readNPZ(f, st.Size(), vet)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ReadNPZFrom reads every array of an .npz archive of the given size,
// after vet (nil: none) has accepted its header.
func ReadNPZFrom(r io.ReaderAt, size int64, vet Vet) (map[string]*tensor.Tensor, error) {
	return readNPZ(r, size, vet)
}

// readNPZ reads every array of an .npz archive, each after vet accepted
// it and within this machine's available memory; a member is all of its
// array, as its header declares.
func readNPZ(r io.ReaderAt, size int64, vet Vet) (map[string]*tensor.Tensor, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	out := map[string]*tensor.Tensor{}
	b := newBudget()
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue // a directory entry
		}
		name := strings.TrimSuffix(f.Name, ".npy")
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("npz: duplicate member %q", f.Name)
		}
		t, err := readMember(f, name, vet, b)
		if err != nil {
			return nil, fmt.Errorf("npz member %q: %w", f.Name, err)
		}
		out[name] = t
	}
	return out, nil
}

// readMember reads the array of member f, called name.
func readMember(f *zip.File, name string, vet Vet, b *budget) (*tensor.Tensor, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	size := int64(f.UncompressedSize64)
	if f.UncompressedSize64 > math.MaxInt64 {
		size = math.MaxInt64
	}
	t, err := read(source{r: rc, size: size, whole: true}, name, vet, b)
	if err != nil {
		return nil, err
	}
	// Read to the end, so that the zip reader checks the member's
	// length and checksum (it refuses bytes beyond its declared size).
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return nil, err
	}
	return t, nil
}

// WriteNPZ writes the tensors to the .npz file at path, as stored members
// "name.npy" sorted by name.
func WriteNPZ(path string, tensors map[string]*tensor.Tensor) error {
	return createWith(path, func(w io.Writer) error { return WriteNPZTo(w, tensors) })
}

// WriteNPZTo writes tensors as an .npz archive to w, members in the
// order of their names.
func WriteNPZTo(w io.Writer, tensors map[string]*tensor.Tensor) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	zw := zip.NewWriter(w)
	for _, n := range names {
		if n == "" {
			return errors.New("npz: empty tensor name")
		}
		mw, err := zw.CreateHeader(&zip.FileHeader{Name: n + ".npy", Method: zip.Store})
		if err != nil {
			return err
		}
		if err := Write(mw, tensors[n]); err != nil {
			return fmt.Errorf("npz member %q: %w", n, err)
		}
	}
	return zw.Close()
}

// Stored is the dtype a tensor of dtype dt is written as: itself, but
// for bf16, which NumPy lacks, written as f32.
func Stored(dt lang.DType) lang.DType {
	if dt == lang.BF16 {
		return lang.F32
	}
	return dt
}

// AsDType is t, read from a .npy file, as a tensor of dtype dt: a bf16
// tensor is written as f32 (Stored), which AsDType converts back; any
// other tensor is returned as it is.
func AsDType(t *tensor.Tensor, dt lang.DType) *tensor.Tensor {
	if dt != lang.BF16 || t.DType != Stored(dt) {
		return t
	}
	return tensor.FromFloats(lang.BF16, t.Shape, t.F)
}
