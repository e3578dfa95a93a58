package check_test

import (
	"strconv"
	"strings"
	"testing"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/parser"
)

// The operators of these tests, written here so that they do not follow
// changes to the standard library.
const instOps = `
op matmul(A: [M, K], B: [K, N]) -> [M, N] = lambda i, j: sum(lambda k: A[i, k] * B[k, j])

op conv2d<stride = 1, pad = 0>(data: [B, C, H, W], filters: [O, C, KH, KW])
    -> [B, O, (H + 2*pad - KH)/stride + 1, (W + 2*pad - KW)/stride + 1] =
    lambda b, o, y, x: sum(lambda c, dy, dx: data[b, c, y*stride + dy - pad, x*stride + dx - pad] else 0.0 * filters[o, c, dy, dx])

op softmax<axis = -1>(x: [*A:axis, N, *B]) -> [*A, N, *B] =
    let m: [*A, *B] = lambda *a, *b: max(lambda k: x[*a, k, *b]) in
    let e: [*A, N, *B] = lambda *a, n, *b: exp(x[*a, n, *b] - m[*a, *b]) in
    let s: [*A, *B] = lambda *a, *b: sum(lambda k: e[*a, k, *b]) in
    lambda *a, n, *b: e[*a, n, *b] / s[*a, *b]

op reduce_sum<axes: list = [], keepdims = true>(x: [*S]) -> [*reduce_dims(S, axes, keepdims)] =
    lambda *o: sum(lambda *r < *pick(S, axes): x[*reduce_index(o, r, axes, keepdims)])

op transpose<perm: list = []>(x: [*S]) -> [*permute(S, perm)] = lambda *o: x[*unpermute(o, perm)]

op reshape<shape: list>(x: [*S]) -> [*reshape_dims(S, shape)] =
    lambda *o: x[*unravel(ravel(o, reshape_dims(S, shape)), S)]

op slice<starts: list, ends: list, axes: list = [], steps: list = []>(x: [*S]) -> [*slice_dims(S, starts, ends, axes, steps)] =
    lambda *o: x[*slice_index(o, S, starts, ends, axes, steps)]

op concat<axis = 0>(a: [*A:axis, N, *B], b: [*A, M, *B]) -> [*A, N + M, *B] =
    lambda *i, n, *j: select(n < N, a[*i, n, *j], b[*i, n - N, *j])

op add(a: [*A], b: [*B]) -> [*broadcast(A, B)] = lambda *i: a[*i] + b[*i]

op masked<causal = false, groups = 1>(q: [groups * H, S], k: [H, S]) -> [groups * H, S] =
    lambda h, i: select(causal && i > 0, -1.0, q[h, i] + k[h / groups, i])

op badmask<flag = true>(x: [N]) -> [N] = lambda i: select(flag && 3, 0.0, x[i])

op guarded<axes: list = []>(x: [N]) -> [N] = lambda i: select(len(axes) > 0 && axes[0] == i, 0.0, x[i])
op ramp(x: [N]) -> [N] = lambda i: x[i] * float(i)
op shifted(x: [N]) -> [N] = lambda i: shl(x[i], 1)
op widened(x: [N]) -> [N] = lambda i: bitcast(x[i], f64)
op reread(x: [N]) -> [N] = lambda i: bitcast(x[i], x)
`

var instFile = func() *lang.File {
	f, err := parser.Parse("ops.tdl", []byte(instOps))
	if err != nil {
		panic(err)
	}
	return f
}()

func opDecl(t *testing.T, name string) *lang.OpDecl {
	t.Helper()
	for _, op := range instFile.Ops {
		if op.Name == name {
			return op
		}
	}
	t.Fatalf("no operator %s", name)
	return nil
}

// tensorType reads "f32[2, N]".
func tensorType(t *testing.T, s string) check.TensorType {
	t.Helper()
	open := strings.Index(s, "[")
	tt := check.TensorType{DType: lang.ParseDType(s[:open])}
	if tt.DType == lang.Invalid {
		t.Fatalf("bad dtype in %s", s)
	}
	body := strings.TrimSuffix(s[open+1:], "]")
	if body == "" {
		return tt
	}
	for _, d := range strings.Split(body, ",") {
		d = strings.TrimSpace(d)
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			tt.Shape = append(tt.Shape, lang.Const(n))
		} else {
			tt.Shape = append(tt.Shape, lang.Sym(d))
		}
	}
	return tt
}

func ints(ns ...int64) ir.AttrValue {
	l := ir.AttrValue{Kind: ir.AttrList, List: []ir.AttrValue{}}
	for _, n := range ns {
		l.List = append(l.List, ir.AttrValue{Kind: ir.AttrInt, Int: n})
	}
	return l
}

func intAttr(n int64) ir.AttrValue { return ir.AttrValue{Kind: ir.AttrInt, Int: n} }

func boolAttr(b bool) ir.AttrValue { return ir.AttrValue{Kind: ir.AttrBool, Bool: b} }

func instantiate(t *testing.T, op string, attrs map[string]ir.AttrValue, inputs ...string) (*ir.Instance, error) {
	t.Helper()
	var types []check.TensorType
	for _, in := range inputs {
		types = append(types, tensorType(t, in))
	}
	return check.Instantiate(opDecl(t, op), attrs, types, lang.Pos{File: "call.tdl", Line: 1, Col: 1})
}

type instCase struct {
	name   string
	op     string
	attrs  map[string]ir.AttrValue
	inputs []string
	want   string
}

func TestInstances(t *testing.T) {
	for _, c := range instCases {
		inst, err := instantiate(t, c.op, c.attrs, c.inputs...)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := strings.TrimSpace(inst.String()); got != strings.TrimSpace(c.want) {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", c.name, got, strings.TrimSpace(c.want))
		}
	}
}

func attrs(kv ...any) map[string]ir.AttrValue {
	m := map[string]ir.AttrValue{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(ir.AttrValue)
	}
	return m
}

var instCases = []instCase{
	{"matmul", "matmul", nil, []string{"f32[64, 128]", "f32[128, 32]"}, `
instance matmul(A: f32[64, 128], B: f32[128, 32])
  out out: f32[64, 32] = lambda i, j: sum(lambda k < 128: (A[i, k] * B[k, j]))`},
	{"matmul symbolic", "matmul", nil, []string{"f16[M, K]", "f16[K, 8]"}, `
instance matmul(A: f16[M, K], B: f16[K, 8])
  out out: f16[M, 8] = lambda i, j: sum(lambda k < K: (A[i, k] * B[k, j]))`},
	// (32 + 2*1 - 3)/2 + 1 = 16; the padded reads keep their else.
	{"conv2d stride 2 pad 1", "conv2d", attrs("stride", intAttr(2), "pad", intAttr(1)), []string{"f32[1, 3, 32, 32]", "f32[8, 3, 3, 3]"}, `
instance conv2d<stride = 2, pad = 1>(data: f32[1, 3, 32, 32], filters: f32[8, 3, 3, 3])
  out out: f32[1, 8, 16, 16] = lambda b, o, y, x: sum(lambda c < 3, dy < 3, dx < 3: ((data[b, c, (((y * 2) + dy) - 1), (((x * 2) + dx) - 1)] else 0) * filters[o, c, dy, dx]))`},
	// (H + 2 - 3)/2 + 1 and (W + 2 - 5)/2 + 1 in canonical form.
	{"conv2d symbolic", "conv2d", attrs("stride", intAttr(2), "pad", intAttr(1)), []string{"f32[N, 3, H, W]", "f32[8, 3, 3, 5]"}, `
instance conv2d<stride = 2, pad = 1>(data: f32[N, 3, H, W], filters: f32[8, 3, 3, 5])
  out out: f32[N, 8, (H + 1)/2, (W + 1)/2 - 1] = lambda b, o, y, x: sum(lambda c < 3, dy < 3, dx < 5: ((data[b, c, (((y * 2) + dy) - 1), (((x * 2) + dx) - 1)] else 0) * filters[o, c, dy, dx]))`},
	{"softmax axis 1", "softmax", attrs("axis", intAttr(1)), []string{"f32[2, 5, 7]"}, `
instance softmax<axis = 1>(x: f32[2, 5, 7])
  let m: f32[2, 7] = lambda a0, b0: max(lambda k < 5: x[a0, k, b0])
  let e: f32[2, 5, 7] = lambda a0, n, b0: exp((x[a0, n, b0] - m[a0, b0]))
  let s: f32[2, 7] = lambda a0, b0: sum(lambda k < 5: e[a0, k, b0])
  out out: f32[2, 5, 7] = lambda a0, n, b0: (e[a0, n, b0] / s[a0, b0])`},
	{"softmax last axis", "softmax", nil, []string{"f32[B, 10]"}, `
instance softmax<axis = -1>(x: f32[B, 10])
  let m: f32[B] = lambda a0: max(lambda k < 10: x[a0, k])
  let e: f32[B, 10] = lambda a0, n: exp((x[a0, n] - m[a0]))
  let s: f32[B] = lambda a0: sum(lambda k < 10: e[a0, k])
  out out: f32[B, 10] = lambda a0, n: (e[a0, n] / s[a0])`},
	{"reduce_sum keepdims", "reduce_sum", attrs("axes", ints(1), "keepdims", boolAttr(true)), []string{"f32[2, 3, 4]"}, `
instance reduce_sum<axes = [1], keepdims = true>(x: f32[2, 3, 4])
  out out: f32[2, 1, 4] = lambda o0, o1, o2: sum(lambda r0 < 3: x[o0, r0, o2])`},
	// Reduction variables follow the order of axes: r0 for axis -1, r1 for axis 0.
	{"reduce_sum negative axes", "reduce_sum", attrs("axes", ints(-1, 0), "keepdims", boolAttr(false)), []string{"f32[2, 3, 4]"}, `
instance reduce_sum<axes = [-1, 0], keepdims = false>(x: f32[2, 3, 4])
  out out: f32[3] = lambda o0: sum(lambda r0 < 4, r1 < 2: x[r1, o0, r0])`},
	{"reduce_sum all axes", "reduce_sum", nil, []string{"f32[2, 3]"}, `
instance reduce_sum<axes = [], keepdims = true>(x: f32[2, 3])
  out out: f32[1, 1] = lambda o0, o1: sum(lambda r0 < 2, r1 < 3: x[r0, r1])`},
	{"transpose", "transpose", attrs("perm", ints(2, 0, 1)), []string{"f32[2, 3, 4]"}, `
instance transpose<perm = [2, 0, 1]>(x: f32[2, 3, 4])
  out out: f32[4, 2, 3] = lambda o0, o1, o2: x[o1, o2, o0]`},
	{"transpose reverse", "transpose", nil, []string{"i64[2, N]"}, `
instance transpose<perm = []>(x: i64[2, N])
  out out: i64[N, 2] = lambda o0, o1: x[o1, o0]`},
	{"reshape", "reshape", attrs("shape", ints(0, -1)), []string{"f32[2, 3, 4]"}, `
instance reshape<shape = [0, -1]>(x: f32[2, 3, 4])
  out out: f32[2, 12] = lambda o0, o1: x[(((o0 * 12) + o1) / 12), ((((o0 * 12) + o1) / 4) % 3), (((o0 * 12) + o1) % 4)]`},
	// ONNX clamping: ends past the extent stop at it, negative starts count from it.
	{"slice", "slice", attrs("starts", ints(1, -3), "ends", ints(1000, -1), "axes", ints(0, 1), "steps", ints(2, 1)), []string{"f32[10, 8]"}, `
instance slice<starts = [1, -3], ends = [1000, -1], axes = [0, 1], steps = [2, 1]>(x: f32[10, 8])
  out out: f32[5, 2] = lambda o0, o1: x[((o0 * 2) + 1), (o1 + 5)]`},
	{"slice reversed", "slice", attrs("starts", ints(-1), "ends", ints(-1000), "axes", ints(0), "steps", ints(-1)), []string{"f32[5]"}, `
instance slice<starts = [-1], ends = [-1000], axes = [0], steps = [-1]>(x: f32[5])
  out out: f32[5] = lambda o0: x[((o0 * -1) + 4)]`},
	{"concat", "concat", attrs("axis", intAttr(1)), []string{"f32[2, 3]", "f32[2, 5]"}, `
instance concat<axis = 1>(a: f32[2, 3], b: f32[2, 5])
  out out: f32[2, 8] = lambda i0, n: select((n < 3), a[i0, n], b[i0, (n - 3)])`},
	// causal && i > 0 is false at compile time when causal is (the
	// branch is picked), and h / 1 is h (the read stays affine).
	// The guard decides at compile time: axes[0] is never read.
	{"guarded read", "guarded", nil, []string{"f32[4]"}, `
instance guarded<axes = []>(x: f32[4])
  out out: f32[4] = lambda i: x[i]`},
	{"masked, decided at compile time", "masked", nil, []string{"f32[4, 6]", "f32[4, 6]"}, `
instance masked<causal = false, groups = 1>(q: f32[4, 6], k: f32[4, 6])
  out out: f32[4, 6] = lambda h, i: (q[h, i] + k[h, i])`},
	{"add [2, 3] + [3]", "add", nil, []string{"f32[2, 3]", "f32[3]"}, `
instance add(a: f32[2, 3], b: f32[3])
  out out: f32[2, 3] = lambda i0, i1: (a[i0, i1] + b[i1])`},
	// Size-1 dimensions read index 0; i32 promotes to f32.
	{"add [2, 1] + [1, 3]", "add", nil, []string{"f32[2, 1]", "i32[1, 3]"}, `
instance add(a: f32[2, 1], b: i32[1, 3])
  out out: f32[2, 3] = lambda i0, i1: (a[i0, 0] + f32(b[0, i1]))`},
}

// Errors of the call are reported at the call site; errors found while
// evaluating the operator's own shape functions at their place in its text.
func TestInstantiateErrors(t *testing.T) {
	for _, c := range []struct {
		op     string
		attrs  map[string]ir.AttrValue
		inputs []string
		want   string
	}{
		{"matmul", nil, []string{"f32[64, 128]", "f32[100, 32]"}, "call.tdl:1:1: matmul(f32[64, 128], f32[100, 32]): B must be [K, N] where K = 128 from A"},
		{"matmul", nil, []string{"f32[64, 128]"}, "call.tdl:1:1: matmul takes 2 inputs, found 1"},
		{"add", nil, []string{"f32[2, 3]", "f32[4]"}, "ops.tdl:28:31: cannot broadcast [2, 3] with [4]: dimension 3 against 4"},
		{"conv2d", attrs("stride", intAttr(0)), []string{"f32[1, 3, 8, 8]", "f32[8, 3, 3, 3]"}, "ops.tdl:5:31: division of a dimension by 0"},
		{"reduce_sum", attrs("axes", ints(3)), []string{"f32[2, 3]"}, "ops.tdl:14:63: reduce_dims: axis 3 out of range for rank 2"},
		{"reshape", attrs("shape", ints(5, -1)), []string{"f32[2, 3]"}, "ops.tdl:19:39: reshape: [2, 3] has 6 elements, the target [5 -1] has 5"},
		{"transpose", attrs("perm", ints(0, 0)), []string{"f32[2, 3]"}, "ops.tdl:17:45: permute: axis 0 repeated"},
		{"softmax", attrs("axis", intAttr(3)), []string{"f32[2, 3]"}, "call.tdl:1:1: input x (f32[2, 3]) has rank 2 but the pattern [*A:axis, N, *B] needs rank at least 4"},
		{"reduce_sum", attrs("axis", intAttr(0)), []string{"f32[2, 3]"}, "call.tdl:1:1: reduce_sum has no attribute axis (did you mean axes?)"},
		{"reshape", nil, []string{"f32[2, 3]"}, "call.tdl:1:1: reshape needs attribute shape"},
		// A constant left operand that does not decide: the right one is
		// checked.
		{"badmask", nil, []string{"f32[4]"}, "ops.tdl:33:64: && needs two bools, found bool and i64"},
		// float() of an index gave 0.
		{"ramp", nil, []string{"f32[4]"}, "ops.tdl:36:43: an index is not a compile-time number: convert it in a lambda with f32(...) or f64(...)"},
		// Bit functions take integers; bitcast keeps the width.
		{"shifted", nil, []string{"f32[4]"}, "ops.tdl:37:39: shl works on the bits of integers, found f32 (bitcast(x, i32) reinterprets a float's bits)"},
		{"shifted", nil, []string{"u8[4]"}, ""},
		{"widened", nil, []string{"f32[4]"}, "ops.tdl:38:39: bitcast from f32 to f64: the widths differ (32 and 64 bits)"},
		{"widened", nil, []string{"i64[4]"}, ""},
		{"reread", nil, []string{"i32[4]"}, "ops.tdl:39:52: the second argument of bitcast must be a dtype (i32, f32, ...)"},
	} {
		_, err := instantiate(t, c.op, c.attrs, c.inputs...)
		if c.want == "" && err == nil {
			continue // a well-typed neighbour of an error
		}
		if err == nil || err.Error() != c.want {
			t.Errorf("%s%v:\n got  %v\n want %s", c.op, c.inputs, err, c.want)
		}
	}
}
