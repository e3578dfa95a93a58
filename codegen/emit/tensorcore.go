package emit

import (
	"math"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// TensorCores is a Machine with warp-wide matrix instructions, which the
// tensor-core forms lower their products to.
type TensorCores interface {
	// Round rounds the float x to the factors' format in precision mode
	// p: in TF32 (10 bits of fraction, to nearest, ties away from zero)
	// an i32, the bits of an f32 whose low 13 bits are 0; in BF16 and F16
	// (to nearest even) the i16 of its bits.
	Round(m *Module, b *ir.Block, p precision.Mode, x value.Value) value.Value
	// LoadMatrix is ldmatrix: n (1, 2 or 4) 8 × 8 matrices of 16-bit
	// values, each row 16 bytes of shared memory, read by the whole warp
	// together: lane l gives in row the address of row l%8 of matrix l/8
	// (lanes from 8n on give none), and receives, of each matrix, the
	// 32 bits at row l/4, word l%4, as an i32.
	LoadMatrix(m *Module, b *ir.Block, row value.Value, n int) []value.Value
	// MMA is D = A·B + C for one 16 × 8 × K product of a warp in mode
	// p (K = 8 in TF32, 16 in BF16 and F16), A and B i32 registers of the
	// mode's format (Round: one TF32 value, or two 16-bit ones, element 0
	// in the low half), C and D in f32. Every lane of the warp takes
	// part; with g = lane/4 and q = lane%4, a lane holds (PTX's
	// mma.m16n8k8 and m16n8k16, A row-major, B column-major), where k(e)
	// is depth q in TF32 and 2q+e in BF16 and F16 (element e of a
	// register) and H = K/2:
	//
	//	a: A[g][k], A[g+8][k], A[g][H+k], A[g+8][H+k]
	//	b: B[k][g], B[H+k][g]
	//	c, d: C[g][2q], C[g][2q+1], C[g+8][2q], C[g+8][2q+1]
	MMA(m *Module, b *ir.Block, p precision.Mode, a [4]value.Value, bv [2]value.Value, c [4]value.Value) [4]value.Value
}

// The tensor-core forms: in the tf32, bf16 and f16 modes, a contraction's GPU
// flavour is the tiled form's (the same tiles, stages and epilogue:
// tiledStages) with its stages side-major (tensorStages) and each
// stage's products on tensor cores (mmaWork); its host flavour is the
// tiled form's. A form applies where the tile's warps can share its
// 16 × 8 products evenly (mmaLayout).
type tensorCoreForm struct {
	tiledForm
	mode precision.Mode // TF32, BF16 or F16
}

func (f tensorCoreForm) Name() string { return "tiled-" + f.mode.String() }

// Applies in the form's mode, but to a contraction whose factors are
// stored in a 16-bit format (a model's f16 or bf16 tensors), which in
// every mode that computes in f32 runs in that format's form, its
// factors taken exactly.
func (f tensorCoreForm) Applies(k *kernel.Kernel, p precision.Mode) bool {
	if k.GEMM == nil || k.PackOnly {
		return false
	}
	if stored := storedIn(k); p.InF32() && stored != precision.Exact {
		if stored != f.mode {
			return false
		}
	} else if p != f.mode {
		return false
	}
	_, _, ok := mmaLayout(blocking.GPUTile(k.GEMM), mmaDepth(f.mode))
	return ok
}

// storedIn is the 16-bit format (F16 or BF16) that both factors of
// contraction k are plain reads of, Exact where they are not.
func storedIn(k *kernel.Kernel) precision.Mode {
	format := map[lang.DType]precision.Mode{lang.F16: precision.F16, lang.BF16: precision.BF16}
	a, okA := k.GEMM.A.(*tir.Access)
	b, okB := k.GEMM.B.(*tir.Access)
	if !okA || !okB || a.T.DType != b.T.DType {
		return precision.Exact
	}
	if m, ok := format[a.T.DType]; ok {
		return m
	}
	return precision.Exact
}

func (f tensorCoreForm) Launch(k *kernel.Kernel, _ precision.Mode) Launch {
	return tiledLaunch(k, tensorStages(f.mode))
}

func (f tensorCoreForm) GPU(fn *Func) { fn.f.tensorCoreLoop(f.mode) }

// tensorStages is the tensor-core forms' layout of the stages in mode p:
// side-major, so that a row of a stage's ldmatrix is 16 bytes of one
// side position's depth values; in TF32 f32 (rounded to TF32 when
// loaded into fragments), in BF16 and F16 the i16 of the values rounded
// to the mode's format as they are stored.
func tensorStages(p precision.Mode) stageLayout {
	if p == precision.TF32 {
		return stageLayout{elem: types.Float, size: 4, sideMajor: true, store: func(_ *fn, x value.Value) value.Value { return x }}
	}
	return stageLayout{elem: types.I16, size: 2, sideMajor: true, store: func(f *fn, x value.Value) value.Value {
		if p == precision.F16 {
			f.checkF16Range(x)
		}
		return f.m.Machine.(TensorCores).Round(f.m, f.b, p, x)
	}}
}

// checkF16Range records a finite factor x that f16 would make infinite
// (|x| ≥ 65520, which rounds to 2¹⁶) in the status words
// (plan.StatusF16Overflow, then x's bits), unless an earlier error is
// there: no bound covers it, and autocast's products would silently be
// infinite or NaN.
func (f *fn) checkF16Range(x value.Value) {
	magnitude := f.b.NewAnd(f.b.NewBitCast(x, types.I32), i32(0x7fffffff))
	over := f.b.NewAnd(f.b.NewICmp(enum.IPredUGE, magnitude, i32(int64(math.Float32bits(65520)))),
		f.b.NewICmp(enum.IPredULT, magnitude, i32(0x7f800000)))
	f.ifThen(over, func() {
		pair := f.b.NewCmpXchg(f.status, i64(0), i64(int64(plan.StatusF16Overflow)), enum.AtomicOrderingMonotonic, enum.AtomicOrderingMonotonic)
		f.ifThen(f.b.NewExtractValue(pair, 1), func() {
			bits := f.b.NewZExt(f.b.NewBitCast(x, types.I32), types.I64)
			f.b.NewStore(bits, f.b.NewGetElementPtr(types.I64, f.status, i64(2)))
		})
	})
}

// mmaDepth is the depth of one tensor-core product in mode p.
func mmaDepth(p precision.Mode) int64 {
	if p == precision.TF32 {
		return 8
	}
	return 16
}

// The shape of one tensor-core product: mmaM × mmaN results (and
// mmaDepth deep).
const mmaM, mmaN = 16, 8

// mmaLayout shares tile t's mmaM × mmaN products among its warps: each
// warp wm × wn of them (a block of wm·mmaM rows and wn·mmaN columns),
// the warps in a grid over the tile, wn even (B's fragments are loaded
// two product columns at a time). Of the splits that exist it takes the
// one that loads the fewest fragments a stage (4 registers per product
// row, 2 per product column), for products depth deep; ok is false
// where none does.
func mmaLayout(t blocking.Tile, depth int64) (wm, wn int64, ok bool) {
	warps := t.Threads / 32
	tilesM, tilesN := t.M/mmaM, t.N/mmaN
	if t.Threads%32 != 0 || t.K%depth != 0 || t.M%mmaM != 0 || t.N%mmaN != 0 || tilesM*tilesN%warps != 0 {
		return 0, 0, false
	}
	per := tilesM * tilesN / warps
	for m := int64(1); m <= per; m++ {
		n := per / m
		if per%m != 0 || tilesM%m != 0 || tilesN%n != 0 || n%2 != 0 {
			continue
		}
		// Ties go to the larger m: 4 × 4 blocks of a 128 × 128 tile,
		// 2 × 2 of a 64 × 64, the tiled form's shapes of a thread's results.
		if !ok || 4*m+2*n <= 4*wm+2*wn {
			wm, wn, ok = m, n, true
		}
	}
	return wm, wn, ok
}

// tensorCoreLoop lowers a tensor-core kernel (GPU flavour), its
// products in mode p.
func (f *fn) tensorCoreLoop(p precision.Mode) {
	tc, ok := f.m.Machine.(TensorCores)
	if !ok {
		fail("the %s machine has no tensor cores for the %s form", f.m.Machine.Name(), tensorCoreForm{mode: p}.Name())
	}
	t := blocking.GPUTile(f.k.GEMM)
	wm, wn, _ := mmaLayout(t, mmaDepth(p))
	f.tiledStages(t, tensorStages(p), func(tid value.Value, sm, sn int64) tileWork {
		warp, lane := f.b.NewUDiv(tid, i64(32)), f.b.NewURem(tid, i64(32))
		warpsN := t.N / (wn * mmaN)
		return &mmaWork{tc: tc, mode: p, t: t, wm: wm, wn: wn, sm: sm, sn: sn,
			row0: f.b.NewMul(f.b.NewUDiv(warp, i64(warpsN)), i64(wm*mmaM)),
			col0: f.b.NewMul(f.b.NewURem(warp, i64(warpsN)), i64(wn*mmaN)),
			lane: lane,
			g:    f.b.NewUDiv(lane, i64(4)),
			q:    f.b.NewURem(lane, i64(4))}
	})
}

// mmaWork is the tiled form's products on tensor cores: a warp owns wm ×
// wn products of mmaM × mmaN results from tile row row0 and column col0;
// a lane, by its place g, q in the fragments (TensorCores.MMA), owns
// 2·wm rows (g and g+8 of each product row) and 2·wn columns (2q and
// 2q+1 of each product column) of them:
//
//	for each mmaDepth of the stage's depth:
//	  a[i] = the fragment of As for product row i, b[j] of Bs for product column j (ldmatrix)
//	  C[i,j] = mma(a[i], b[j], C[i,j])
type mmaWork struct {
	tc         TensorCores
	mode       precision.Mode
	t          blocking.Tile
	wm, wn     int64
	sm, sn     int64
	row0, col0 value.Value // the warp's first tile row and column
	lane       value.Value
	g, q       value.Value // the lane's place in the fragments
}

func (w *mmaWork) micro() (rows, cols int64) { return 2 * w.wm, 2 * w.wn }

func (w *mmaWork) products(f *fn, as, bs stageRef, acc []value.Value) []value.Value {
	next := append([]value.Value(nil), acc...)
	_, cols := w.micro()
	depth := mmaDepth(w.mode)
	h := depth / 2
	for k0 := int64(0); k0 < w.t.K; k0 += depth {
		// A product row's fragment is one ldmatrix.x4 of the 8 × 8
		// matrices at rows 0, 8, 0, 8 and depths 0, 0, H, H from its
		// first row and k0; B's of two product columns one of the
		// matrices at columns 0, 0, 8, 8 and depths 0, H, 0, H.
		a := make([][4]value.Value, w.wm)
		for i := range a {
			at := f.b.NewAdd(w.row0, i64(int64(i)*mmaM))
			copy(a[i][:], w.fragments(f, as, w.sm, at, k0, [][2]int64{{0, 0}, {8, 0}, {0, h}, {8, h}}))
		}
		b := make([][2]value.Value, w.wn)
		for j := int64(0); j < w.wn; j += 2 { // wn is even (mmaLayout)
			at := f.b.NewAdd(w.col0, i64(j*mmaN))
			r := w.fragments(f, bs, w.sn, at, k0, [][2]int64{{0, 0}, {0, h}, {8, 0}, {8, h}})
			b[j], b[j+1] = [2]value.Value{r[0], r[1]}, [2]value.Value{r[2], r[3]}
		}
		for i := range a {
			for j := range b {
				// c0..c3 of product (i, j): the lane's rows 2i, 2i+1 and
				// columns 2j, 2j+1.
				at := [4]int{(2*i)*int(cols) + 2*j, (2*i)*int(cols) + 2*j + 1, (2*i+1)*int(cols) + 2*j, (2*i+1)*int(cols) + 2*j + 1}
				var c [4]value.Value
				for r, e := range at {
					c[r] = next[e]
				}
				d := w.tc.MMA(f.m, f.b, w.mode, a[i], b[j], c)
				for r, e := range at {
					next[e] = d[r]
				}
			}
		}
	}
	return next
}

// fragments loads registers of fragments from a side-major stage (rows
// stride values apart) with one ldmatrix of the
// 8 × 8 matrices mats, each given as its first side position and depth
// from side position at and depth k0; a 16-bit matrix row is 8 depth
// values, a TF32 one 4, each rounded to TF32 here.
func (w *mmaWork) fragments(f *fn, stage stageRef, stride int64, at value.Value, k0 int64, mats [][2]int64) []value.Value {
	// Lane l gives row l%8 of matrix (l/8) % len(mats).
	n := int64(len(mats))
	mat, r := f.b.NewURem(f.b.NewUDiv(w.lane, i64(8)), i64(n)), f.b.NewURem(w.lane, i64(8))
	side, kk := mats[0][0], mats[0][1]
	var s, k value.Value = i64(side), i64(kk)
	for m := int64(1); m < n; m++ {
		is := f.b.NewICmp(enum.IPredEQ, mat, i64(m))
		s = f.b.NewSelect(is, i64(mats[m][0]), s)
		k = f.b.NewSelect(is, i64(mats[m][1]), k)
	}
	place := f.b.NewAdd(f.b.NewMul(f.b.NewAdd(at, f.b.NewAdd(s, r)), i64(stride)), f.b.NewAdd(k, i64(k0)))
	regs := w.tc.LoadMatrix(f.m, f.b, stage.ptr(f, place, types.I8), len(mats))
	if w.mode == precision.TF32 {
		for e, x := range regs {
			regs[e] = w.tc.Round(f.m, f.b, w.mode, f.b.NewBitCast(x, types.Float))
		}
	}
	return regs
}

// row: the lane's row i is row g + 8·(i%2) of product row i/2.
func (w *mmaWork) row(f *fn, i value.Value) value.Value {
	half := f.b.NewMul(f.b.NewURem(i, i64(2)), i64(8))
	return f.b.NewAdd(w.row0, f.b.NewAdd(f.b.NewMul(f.b.NewUDiv(i, i64(2)), i64(mmaM)), f.b.NewAdd(w.g, half)))
}

// col: the lane's column j is column 2q + j%2 of product column j/2.
func (w *mmaWork) col(f *fn, j int64) value.Value {
	return f.b.NewAdd(w.col0, f.b.NewAdd(i64(j/2*mmaN+j%2), f.b.NewMul(w.q, i64(2))))
}
