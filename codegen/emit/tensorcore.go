package emit

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang/precision"
)

// TensorCores is a Machine with warp-wide matrix instructions, which the
// tensor-core forms lower their products to.
type TensorCores interface {
	// Factor rounds the floats of one register of a product's factor
	// to the format of precision mode p, packed as the instructions take
	// them: in TF32 (10 bits of fraction, to nearest, ties away from
	// zero) one float x[0]; in BF16 and F16 (to nearest even) two, x[0]
	// in the low half.
	Factor(m *Module, b *ir.Block, p precision.Mode, x []value.Value) value.Value
	// MMA is D = A·B + C for one 16 × 8 × K product of a warp in mode
	// p (K = 8 in TF32, 16 in BF16 and F16), A and B in the mode's format, C and
	// D in f32. Every lane of the warp takes part; with g = lane/4 and
	// q = lane%4, a lane holds (PTX's mma.m16n8k8 and m16n8k16, A
	// row-major, B column-major), where k(e) is depth q in TF32 and 2q+e
	// in BF16 and F16 (element e of a register) and H = K/2:
	//
	//	a: A[g][k], A[g+8][k], A[g][H+k], A[g+8][H+k]
	//	b: B[k][g], B[H+k][g]
	//	c, d: C[g][2q], C[g][2q+1], C[g+8][2q], C[g+8][2q+1]
	MMA(m *Module, b *ir.Block, p precision.Mode, a [4]value.Value, bv [2]value.Value, c [4]value.Value) [4]value.Value
}

// The tensor-core forms: in the tf32, bf16 and f16 modes, a contraction's GPU
// flavour is the tiled form's (the same tiles, stages and epilogue:
// tiledStages) with each stage's products on tensor cores (mmaWork);
// its host flavour is the tiled form's. A form applies where the tile's
// warps can share its 16 × 8 products evenly (mmaLayout).
type tensorCoreForm struct {
	tiledForm
	mode precision.Mode // TF32, BF16 or F16
}

func (f tensorCoreForm) Name() string { return "tiled-" + f.mode.String() }

func (f tensorCoreForm) Applies(k *kernel.Kernel, p precision.Mode) bool {
	if p != f.mode || k.GEMM == nil || k.PackOnly {
		return false
	}
	_, _, ok := mmaLayout(blocking.GPUTile(k.GEMM), mmaDepth(p))
	return ok
}

func (f tensorCoreForm) GPU(fn *Func) { fn.f.tensorCoreLoop() }

// mmaDepth is the depth of one tensor-core product in mode p, and
// perRegister the factor's values a register holds.
func mmaDepth(p precision.Mode) int64 {
	if p == precision.TF32 {
		return 8
	}
	return 16
}

func perRegister(p precision.Mode) int64 { return mmaDepth(p) / 8 }

// The shape of one tensor-core product: mmaM × mmaN results (and
// mmaDepth deep).
const mmaM, mmaN = 16, 8

// mmaLayout shares tile t's mmaM × mmaN products among its warps: each
// warp wm × wn of them (a block of wm·mmaM rows and wn·mmaN columns),
// the warps in a grid over the tile. Of the splits that exist it takes
// the one that loads the fewest fragments a stage (4 registers per
// product row, 2 per product column), for products depth deep; ok is
// false where none does.
func mmaLayout(t blocking.Tile, depth int64) (wm, wn int64, ok bool) {
	warps := t.Threads / 32
	tilesM, tilesN := t.M/mmaM, t.N/mmaN
	if t.Threads%32 != 0 || t.K%depth != 0 || t.M%mmaM != 0 || t.N%mmaN != 0 || tilesM*tilesN%warps != 0 {
		return 0, 0, false
	}
	per := tilesM * tilesN / warps
	for m := int64(1); m <= per; m++ {
		n := per / m
		if per%m != 0 || tilesM%m != 0 || tilesN%n != 0 {
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

// tensorCoreLoop lowers a tensor-core kernel (GPU flavour).
func (f *fn) tensorCoreLoop() {
	tc, ok := f.m.Machine.(TensorCores)
	if !ok {
		fail("the %s machine has no tensor cores for the %s form", f.m.Machine.Name(), tensorCoreForm{mode: f.m.Precision}.Name())
	}
	t := blocking.GPUTile(f.k.GEMM)
	wm, wn, _ := mmaLayout(t, mmaDepth(f.m.Precision))
	f.tiledStages(t, func(tid value.Value, sm, sn int64) tileWork {
		warp, lane := f.b.NewUDiv(tid, i64(32)), f.b.NewURem(tid, i64(32))
		warpsN := t.N / (wn * mmaN)
		return &mmaWork{tc: tc, mode: f.m.Precision, t: t, wm: wm, wn: wn, sm: sm, sn: sn,
			row0: f.b.NewMul(f.b.NewUDiv(warp, i64(warpsN)), i64(wm*mmaM)),
			col0: f.b.NewMul(f.b.NewURem(warp, i64(warpsN)), i64(wn*mmaN)),
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
//	  a[i] = the fragment of As for product row i, b[j] of Bs for product column j, in the mode's format
//	  C[i,j] = mma(a[i], b[j], C[i,j])
type mmaWork struct {
	tc         TensorCores
	mode       precision.Mode
	t          blocking.Tile
	wm, wn     int64
	sm, sn     int64
	row0, col0 value.Value // the warp's first tile row and column
	g, q       value.Value // the lane's place in the fragments
}

func (w *mmaWork) micro() (rows, cols int64) { return 2 * w.wm, 2 * w.wn }

func (w *mmaWork) products(f *fn, as, bs *ir.Global, acc []value.Value) []value.Value {
	next := append([]value.Value(nil), acc...)
	_, cols := w.micro()
	depth := mmaDepth(w.mode)
	for k0 := int64(0); k0 < w.t.K; k0 += depth {
		a := make([][4]value.Value, w.wm)
		for i := range a {
			row := f.b.NewAdd(w.row0, f.b.NewAdd(i64(int64(i)*mmaM), w.g))
			for r := range a[i] {
				// a0..a3: rows g, g+8, g, g+8; depths k, k, H+k, H+k.
				at := f.b.NewAdd(row, i64(int64(r%2)*8))
				a[i][r] = w.factor(f, as, w.sm, at, k0+int64(r/2)*depth/2)
			}
		}
		b := make([][2]value.Value, w.wn)
		for j := range b {
			col := f.b.NewAdd(w.col0, f.b.NewAdd(i64(int64(j)*mmaN), w.g))
			for r := range b[j] {
				// b0, b1: depths k and H+k of column g.
				b[j][r] = w.factor(f, bs, w.sn, col, k0+int64(r)*depth/2)
			}
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

// factor is one register of a fragment: the lane's values at side
// position at and depths k0 + k(e) of shared array sh (a stage, rows
// stride apart), rounded to the mode's format.
func (w *mmaWork) factor(f *fn, sh *ir.Global, stride int64, at value.Value, k0 int64) value.Value {
	per := perRegister(w.mode)
	x := make([]value.Value, per)
	for e := range x {
		kk := f.b.NewAdd(f.b.NewMul(w.q, i64(per)), i64(k0+int64(e)))
		x[e] = f.b.NewLoad(types.Float, f.b.NewGetElementPtr(sh.ContentType, sh, i64(0), f.b.NewAdd(f.b.NewMul(kk, i64(stride)), at)))
	}
	return w.tc.Factor(f.m, f.b, w.mode, x)
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
