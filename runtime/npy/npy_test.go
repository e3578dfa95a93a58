package npy

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// raw builds a .npy file from a header dict and data.
func raw(major byte, hdr string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	b.WriteByte(major)
	b.WriteByte(0)
	if major == 1 {
		b.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(hdr)+1)))
	} else {
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(hdr)+1)))
	}
	b.WriteString(hdr + "\n")
	b.Write(data)
	return b.Bytes()
}

func sample(dt lang.DType, shape []int) *tensor.Tensor {
	t := tensor.New(dt, shape)
	vals := []float64{0, 1, -1, 2.5, -3.75, 100, 1e30, -1e-30, math.Inf(1), math.NaN(), 300, -129, 65504, 1 << 40}
	for i := 0; i < t.Len(); i++ {
		v := vals[i%len(vals)]
		if !dt.IsFloat() && (math.IsInf(v, 0) || math.IsNaN(v)) {
			v = float64(i)
		}
		t.SetFlat(i, v)
	}
	if dt == lang.U64 && t.Len() > 1 {
		t.I[1] = -1 // the largest u64
	}
	return t
}

func same(a, b *tensor.Tensor) bool {
	if a.DType != b.DType || len(a.Shape) != len(b.Shape) || len(a.F) != len(b.F) || len(a.I) != len(b.I) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	for i := range a.F {
		if math.Float64bits(a.F[i]) != math.Float64bits(b.F[i]) && !(math.IsNaN(a.F[i]) && math.IsNaN(b.F[i])) {
			return false
		}
	}
	for i := range a.I {
		if a.I[i] != b.I[i] {
			return false
		}
	}
	return true
}

var allDTypes = []lang.DType{lang.F16, lang.F32, lang.F64, lang.I8, lang.I16, lang.I32, lang.I64, lang.U8, lang.U16, lang.U32, lang.U64, lang.Bool}

func TestRoundTrip(t *testing.T) {
	shapes := [][]int{nil, {0}, {7}, {2, 3}, {2, 0, 3}, {2, 3, 4}}
	for _, dt := range allDTypes {
		for _, shape := range shapes {
			in := sample(dt, shape)
			var b bytes.Buffer
			if err := Write(&b, in); err != nil {
				t.Fatalf("%v%v: Write: %v", dt, shape, err)
			}
			if pre := b.Len() - in.Len()*dt.Size(); pre%64 != 0 {
				t.Errorf("%v%v: data starts at %d, not a multiple of 64", dt, shape, pre)
			}
			out, err := Read(&b)
			if err != nil {
				t.Fatalf("%v%v: Read: %v", dt, shape, err)
			}
			if !same(in, out) {
				t.Errorf("%v%v: round trip changed the tensor:\n%v\n%v", dt, shape, in, out)
			}
			if b.Len() != 0 {
				t.Errorf("%v%v: %d bytes left unread", dt, shape, b.Len())
			}
		}
	}
}

func TestBF16WrittenAsF32(t *testing.T) {
	in := tensor.FromFloats(lang.BF16, []int{3}, []float64{1, 1.0078125, -3.140625})
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "'<f4'") {
		t.Errorf("bf16 not written as <f4: %q", b.String()[:70])
	}
	out, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if out.DType != lang.F32 || out.F[1] != 1.0078125 || out.F[2] != -3.140625 {
		t.Errorf("got %v", out)
	}
}

func TestHeaders(t *testing.T) {
	le := binary.LittleEndian.AppendUint32
	be := binary.BigEndian.AppendUint32
	three := le(le(le(nil, 1), 2), 3)
	threeBE := be(be(be(nil, 1), 2), 3)
	for _, c := range []struct {
		name string
		file []byte
		want string // the tensor's String, or an error substring after "error: "
	}{
		{"v1", raw(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", three), "i32[3] [1, 2, 3]"},
		{"v2", raw(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", three), "i32[3] [1, 2, 3]"},
		{"v3", raw(3, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", three), "i32[3] [1, 2, 3]"},
		{"big endian", raw(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }", threeBE), "i32[3] [1, 2, 3]"},
		{"big endian f4", raw(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,)}", binary.BigEndian.AppendUint32(nil, math.Float32bits(1.5))), "f32[1] [1.5]"},
		{"big endian f2", raw(1, "{'descr': '>f2', 'fortran_order': False, 'shape': ()}", []byte{0x3c, 0x00}), "f16[] 1"},
		{"key order, double quotes, no trailing comma", raw(1, `{"shape": (1, 3), "fortran_order": False, "descr": "<i4"}`, three), "i32[1, 3] [[1, 2, 3]]"},
		{"python2 long", raw(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3L,), }", three), "i32[3] [1, 2, 3]"},
		{"bool nonzero", raw(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", []byte{0, 1, 7}), "bool[3] [false, true, true]"},
		{"scalar", raw(1, "{'descr': '<u8', 'fortran_order': False, 'shape': (), }", binary.LittleEndian.AppendUint64(nil, math.MaxUint64)), "u64[] 18446744073709551615"},
		{"empty", raw(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1000000000000), }", nil), "f64[0, 1000000000000] []"},
		{"fortran", raw(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }", three), "error: Fortran-order"},
		{"bad magic", append([]byte("\x93NUMPZ\x01\x00"), raw(1, "{}", nil)[8:]...), "error: bad magic"},
		{"version", raw(4, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", three), "error: unsupported format version 4.0"},
		{"truncated data", raw(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", three), "error: needs 16 bytes of data but only 12"},
		{"truncated header", raw(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", nil)[:30], "error: truncated header"},
		{"truncated preamble", []byte("\x93NUM"), "error: truncated preamble"},
		{"empty input", nil, "error: empty input"},
		{"absurd shape", raw(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000000000), }", three), "error: needs 8000000000000000000 bytes"},
		{"overflowing shape", raw(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4000000000, 4000000000, 4000000000), }", three), "error: too many elements"},
		{"negative extent", raw(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", three), "error: negative extent"},
		{"unknown dtype", raw(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", three), "error: unsupported dtype \"<c8\""},
		{"structured dtype", raw(1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", three), "error: no string 'descr'"},
		{"missing key", raw(1, "{'descr': '<i4', 'shape': (3,), }", three), "error: no bool 'fortran_order'"},
		{"extra key", raw(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), 'x': 1}", three), "error: unexpected header key \"x\""},
		{"not a dict", raw(1, "(1, 2)", three), "error: not a dict"},
		{"garbage", raw(1, "{'descr': '<i4', 'fortran_order': Fals", three), "error: malformed header"},
		{"unterminated", raw(1, "{'descr': '<i4", three), "error: unterminated string"},
		{"shape not ints", raw(1, "{'descr': '<i4', 'fortran_order': False, 'shape': ('a',), }", three), "error: not an integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Read(bytes.NewReader(c.file))
			var s string
			if err != nil {
				s = "error: " + err.Error()
			} else {
				s = got.String()
			}
			if want, isErr := strings.CutPrefix(c.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %q, want an error containing %q", s, want)
				}
			} else if s != c.want {
				t.Errorf("got %q, want %q", s, c.want)
			}
			// The same through a plain io.Reader (no known length).
			_, err2 := Read(struct{ *bytes.Reader }{bytes.NewReader(c.file)})
			if (err == nil) != (err2 == nil) {
				t.Errorf("plain reader: error %v, with length: %v", err2, err)
			}
		})
	}
}

func TestLargeHeaderUsesV2(t *testing.T) {
	shape := make([]int, 30000) // a header longer than 65535 bytes
	for i := range shape {
		shape[i] = 1
	}
	in := tensor.New(lang.U8, shape)
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	if b.Bytes()[6] != 2 {
		t.Errorf("version %d, want 2", b.Bytes()[6])
	}
	out, err := Read(&b)
	if err != nil || !same(in, out) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	in := sample(lang.F32, []int{3, 4})
	p := filepath.Join(dir, "a.npy")
	if err := WriteFile(p, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadFile(p)
	if err != nil || !same(in, out) {
		t.Fatalf("ReadFile: %v %v", out, err)
	}
	ts := map[string]*tensor.Tensor{}
	for _, dt := range allDTypes {
		ts["t_"+dt.String()] = sample(dt, []int{2, 5})
	}
	ts["scalar"] = sample(lang.F64, nil)
	pz := filepath.Join(dir, "a.npz")
	if err := WriteNPZ(pz, ts); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNPZ(pz)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ts) {
		t.Errorf("got %d tensors, want %d", len(got), len(ts))
	}
	for n, x := range ts {
		if !same(x, got[n]) {
			t.Errorf("%s: got %v, want %v", n, got[n], x)
		}
	}
	// Deterministic output, members sorted by name.
	first, _ := os.ReadFile(pz)
	pz2 := filepath.Join(dir, "b.npz")
	if err := WriteNPZ(pz2, ts); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(pz2)
	if !bytes.Equal(first, second) {
		t.Error("WriteNPZ is not deterministic")
	}
	zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(zr.File); i++ {
		if zr.File[i-1].Name >= zr.File[i].Name {
			t.Errorf("members not sorted: %s before %s", zr.File[i-1].Name, zr.File[i].Name)
		}
	}
}

// npz builds an archive with the given members, deflated when deflate is set.
func npz(t testing.TB, deflate bool, members map[string][]byte, order ...string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, n := range order {
		m := zip.Store
		if deflate {
			m = zip.Deflate
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func npyBytes(t testing.TB, x *tensor.Tensor) []byte {
	var b bytes.Buffer
	if err := Write(&b, x); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestNPZ(t *testing.T) {
	a := sample(lang.I16, []int{4})
	b := sample(lang.F32, []int{2, 2})
	members := map[string][]byte{
		"a.npy":  npyBytes(t, a),
		"dir/":   nil,
		"b":      npyBytes(t, b),
		"bad":    raw(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000,), }", nil),
		"trunc":  npyBytes(t, b)[:140],
		"a":      npyBytes(t, b),
		"fort":   raw(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (1,), }", []byte{1, 0, 0, 0}),
		"trail":  append(npyBytes(t, a), 1, 2, 3),
		"ghost/": nil,
	}
	for _, deflate := range []bool{false, true} {
		f := npz(t, deflate, members, "a.npy", "dir/", "b")
		got, err := ReadNPZFrom(bytes.NewReader(f), int64(len(f)), nil)
		if err != nil {
			t.Fatalf("deflate=%v: %v", deflate, err)
		}
		if len(got) != 2 || !same(got["a"], a) || !same(got["b"], b) {
			t.Errorf("deflate=%v: got %v", deflate, got)
		}
		for _, c := range []struct {
			members []string
			want    string
		}{
			{[]string{"bad"}, `npz member "bad": npy: shape [100000000000] of f64 needs 800000000000 bytes of data but only 0 are present`},
			{[]string{"trunc"}, `npz member "trunc": npy: shape [2 2] of f32 needs 16 bytes of data but only 12 are present`},
			{[]string{"a.npy", "a"}, `npz: duplicate member "a"`},
			{[]string{"fort"}, "Fortran-order"},
			{[]string{"trail"}, `npz member "trail": npy: shape [4] of i16 is 8 bytes of data, but 11 follow the header`},
		} {
			f := npz(t, deflate, members, c.members...)
			_, err := ReadNPZFrom(bytes.NewReader(f), int64(len(f)), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("deflate=%v %v: got %v, want %q", deflate, c.members, err, c.want)
			}
		}
	}
	if _, err := ReadNPZFrom(bytes.NewReader([]byte("not a zip")), 9, nil); err == nil {
		t.Error("no error for a non-zip file")
	}
}

func FuzzRead(f *testing.F) {
	for _, dt := range allDTypes {
		f.Add(npyBytes(f, sample(dt, []int{2, 3})))
	}
	f.Add(raw(2, "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", make([]byte, 16)))
	f.Add(raw(3, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }", []byte{1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		if x.Len() > len(data) {
			t.Fatalf("%d elements from %d bytes", x.Len(), len(data))
		}
		// What was read writes and reads back the same.
		y, err := Read(bytes.NewReader(npyBytes(t, x)))
		if err != nil || !same(x, y) {
			t.Fatalf("re-read: %v", err)
		}
	})
}

func FuzzReadNPZ(f *testing.F) {
	a := npyBytes(f, sample(lang.F32, []int{3}))
	b := npyBytes(f, sample(lang.U8, []int{2, 2}))
	members := map[string][]byte{"a.npy": a, "b.npy": b}
	f.Add(npz(f, false, members, "a.npy", "b.npy"))
	f.Add(npz(f, true, members, "a.npy", "b.npy"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadNPZFrom(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			return
		}
		for _, x := range m {
			if x.DType.Size() == 0 {
				t.Fatalf("invalid dtype %v", x.DType)
			}
		}
	})
}
