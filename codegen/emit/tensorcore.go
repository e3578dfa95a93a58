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
	// ToTF32 rounds the float x to TF32 (10 bits of fraction, to
	// nearest, ties away from zero), as the i32 the instructions take.
	ToTF32(m *Module, b *ir.Block, x value.Value) value.Value
	// MMATF32 is D = A·B + C for one 16 × 8 × 8 product of a warp, A and
	// B in TF32, C and D in f32. Every lane of the warp takes part; with
	// g = lane/4 and q = lane%4, a lane holds (PTX's mma.m16n8k8 with
	// row-major A and column-major B):
	//
	//	a: A[g][q], A[g+8][q], A[g][q+4], A[g+8][q+4]
	//	b: B[q][g], B[q+4][g]
	//	c, d: C[g][2q], C[g][2q+1], C[g+8][2q], C[g+8][2q+1]
	MMATF32(m *Module, b *ir.Block, a [4]value.Value, bv [2]value.Value, c [4]value.Value) [4]value.Value
}

// The tensor-core form: in the tf32 mode, a contraction's GPU flavour is
// the tiled form's (the same tiles, stages and epilogue: tiledStages)
// with each stage's products on tensor cores (mmaWork); its host flavour
// is the tiled form's. It applies where the tile's warps can share its
// 16 × 8 products evenly (mmaLayout).
type tensorCoreForm struct{ tiledForm }

func (tensorCoreForm) Name() string { return "tiled-tf32" }

func (tensorCoreForm) Applies(k *kernel.Kernel, p precision.Mode) bool {
	if p != precision.TF32 || k.GEMM == nil || k.PackOnly {
		return false
	}
	_, _, ok := mmaLayout(blocking.GPUTile(k.GEMM))
	return ok
}

func (tensorCoreForm) GPU(f *Func) { f.f.tensorCoreLoop() }

// The shape of one tensor-core product: mmaM × mmaN results, mmaK deep.
const mmaM, mmaN, mmaK = 16, 8, 8

// mmaLayout shares tile t's mmaM × mmaN products among its warps: each
// warp wm × wn of them (a block of wm·mmaM rows and wn·mmaN columns),
// the warps in a grid over the tile. Of the splits that exist it takes
// the one that loads the fewest fragments a stage (4 registers per
// product row, 2 per product column); ok is false where none does.
func mmaLayout(t blocking.Tile) (wm, wn int64, ok bool) {
	warps := t.Threads / 32
	tilesM, tilesN := t.M/mmaM, t.N/mmaN
	if t.Threads%32 != 0 || t.K%mmaK != 0 || t.M%mmaM != 0 || t.N%mmaN != 0 || tilesM*tilesN%warps != 0 {
		return 0, 0, false
	}
	per := tilesM * tilesN / warps
	for m := int64(1); m <= per; m++ {
		n := per / m
		if per%m != 0 || tilesM%m != 0 || tilesN%n != 0 {
			continue
		}
		if !ok || 4*m+2*n < 4*wm+2*wn {
			wm, wn, ok = m, n, true
		}
	}
	return wm, wn, ok
}

// tensorCoreLoop lowers a tensor-core kernel (GPU flavour).
func (f *fn) tensorCoreLoop() {
	tc, ok := f.m.Machine.(TensorCores)
	if !ok {
		fail("the %s machine has no tensor cores for the %s form", f.m.Machine.Name(), tensorCoreForm{}.Name())
	}
	t := blocking.GPUTile(f.k.GEMM)
	wm, wn, _ := mmaLayout(t)
	f.tiledStages(t, func(tid value.Value, sm, sn int64) tileWork {
		warp, lane := f.b.NewUDiv(tid, i64(32)), f.b.NewURem(tid, i64(32))
		warpsN := t.N / (wn * mmaN)
		return &mmaWork{tc: tc, t: t, wm: wm, wn: wn, sm: sm, sn: sn,
			row0: f.b.NewMul(f.b.NewUDiv(warp, i64(warpsN)), i64(wm*mmaM)),
			col0: f.b.NewMul(f.b.NewURem(warp, i64(warpsN)), i64(wn*mmaN)),
			g:    f.b.NewUDiv(lane, i64(4)),
			q:    f.b.NewURem(lane, i64(4))}
	})
}

// mmaWork is the tiled form's products on tensor cores: a warp owns wm ×
// wn products of mmaM × mmaN results from tile row row0 and column col0;
// a lane, by its place g, q in the fragments (TensorCores.MMATF32), owns
// 2·wm rows (g and g+8 of each product row) and 2·wn columns (2q and
// 2q+1 of each product column) of them:
//
//	for each mmaK of the stage's depth:
//	  a[i] = the fragment of As for product row i, b[j] of Bs for product column j, in TF32
//	  C[i,j] = mma(a[i], b[j], C[i,j])
type mmaWork struct {
	tc         TensorCores
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
	for k0 := int64(0); k0 < w.t.K; k0 += mmaK {
		a := make([][4]value.Value, w.wm)
		for i := range a {
			row := f.b.NewAdd(w.row0, f.b.NewAdd(i64(int64(i)*mmaM), w.g))
			for r := range a[i] {
				// a0..a3: rows g, g+8, g, g+8; depths q, q, q+4, q+4.
				at := f.b.NewAdd(row, i64(int64(r%2)*8))
				kk := f.b.NewAdd(w.q, i64(k0+int64(r/2)*4))
				a[i][r] = w.tf32(f, as, f.b.NewAdd(f.b.NewMul(kk, i64(w.sm)), at))
			}
		}
		b := make([][2]value.Value, w.wn)
		for j := range b {
			col := f.b.NewAdd(w.col0, f.b.NewAdd(i64(int64(j)*mmaN), w.g))
			for r := range b[j] {
				// b0, b1: depths q and q+4 of column g.
				kk := f.b.NewAdd(w.q, i64(k0+int64(r)*4))
				b[j][r] = w.tf32(f, bs, f.b.NewAdd(f.b.NewMul(kk, i64(w.sn)), col))
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
				d := w.tc.MMATF32(f.m, f.b, a[i], b[j], c)
				for r, e := range at {
					next[e] = d[r]
				}
			}
		}
	}
	return next
}

// tf32 loads sh[at] (a float of shared memory) and rounds it to TF32.
func (w *mmaWork) tf32(f *fn, sh *ir.Global, at value.Value) value.Value {
	v := f.b.NewLoad(types.Float, f.b.NewGetElementPtr(sh.ContentType, sh, i64(0), at))
	return w.tc.ToTF32(f.m, f.b, v)
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
