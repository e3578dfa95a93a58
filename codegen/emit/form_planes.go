package emit

import (
	"fmt"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// The planes form: a depthwise convolution on the host, one output
// plane (an image's channel) a call's item. Computed element by element
// (the threads form), a 3 × 3 depthwise convolution of 384 channels of
// 14 × 14 took 260 µs on two threads: rows of 14 are shorter than a
// vector, and the outputs next to the border take the checked scalar
// path. Here a call copies each input plane it needs into zero-padded
// scratch rows, once (fillPlane), computes the plane's sums as one flat
// vector loop over the padded rows, the columns past the output's
// computed and dropped (planeSums), and then runs the kernel's epilogue
// (a bias, a clip, a residual) over the plane in scratch and copies it
// out (planeEpilogue). The GPU computes it as the threads form does.
//
// A stride along the rows takes one set of scratch rows per kernel row
// (row r of set kh is input row stride·r + kh·dilation − pad), so that
// every set is read at the output's row pitch; a column stride of 2
// reads two vectors and keeps the even lanes. Only the f32 modes: the
// exact mode's kernels keep the interpreter's order of additions,
// element by element.
type planesForm struct{}

func (planesForm) Name() string { return "planes" }

func (planesForm) Applies(k *kernel.Kernel, p precision.Mode) bool {
	_, ok := depthwisePlanes(k, p)
	return ok
}

func (planesForm) Launch(k *kernel.Kernel, p precision.Mode) Launch {
	return threadsForm{}.Launch(k, p)
}

// HostRange: the output's planes, a grain of at least planeWork
// multiply-adds. (The form applies in the f32 modes only, where the
// geometry is the same in each: F32 stands for them.)
func (planesForm) HostRange(k *kernel.Kernel) (items, grain int64) {
	pl, _ := depthwisePlanes(k, precision.F32)
	perPlane := max(1, pl.outH*pl.outW*pl.kh*pl.kw)
	return pl.n * pl.o, max(1, planeWork/perPlane)
}

// planeWork is the fewest multiply-adds a host thread is given.
const planeWork = 1 << 15

func (planesForm) GPU(f *Func) { threadsForm{}.GPU(f) }

func (planesForm) Host(f *Func, begin, end value.Value) {
	pl, _ := depthwisePlanes(f.f.k, f.f.m.Precision)
	f.f.planesHost(pl, begin, end)
}

// planes is a depthwise convolution's geometry: n images of c channels
// of h × w, o output channels (mult = o / c of them per input channel)
// of outH × outW, a kh × kw kernel; x and wt are the image's and the
// weights' argument indices.
type planes struct {
	x, wt                     int
	n, c, o, mult             int64
	h, w, outH, outW, kh, kw  int64
	strideH, strideW          int64
	dilH, dilW, padTop, padLf int64
}

// depthwisePlanes describes k as a 2-D depthwise convolution the planes
// form computes: kernel.Convolution's, each output channel reading one
// input channel, a column stride of 1 or 2, an f32 output, in an f32
// mode.
func depthwisePlanes(k *kernel.Kernel, p precision.Mode) (planes, bool) {
	if !p.InF32() || len(k.Vars) != 4 || k.Out().DType != lang.F32 {
		return planes{}, false
	}
	cv, ok := k.Convolution()
	if !ok || cv.Call.Group != cv.Call.C || cv.Call.Strides[1] > 2 {
		return planes{}, false
	}
	c := cv.Call
	return planes{
		x: cv.X, wt: cv.W, n: c.N, c: c.C, o: c.O, mult: c.O / c.C,
		h: c.In[0], w: c.In[1], outH: c.Out[0], outW: c.Out[1], kh: c.Kernel[0], kw: c.Kernel[1],
		strideH: c.Strides[0], strideW: c.Strides[1], dilH: c.Dilations[0], dilW: c.Dilations[1],
		padTop: c.PadsBegin[0], padLf: c.PadsBegin[1],
	}, true
}

// pitch is the scratch rows' length: the padded input's columns that
// the output reads, a multiple of the column stride, so that the
// output's row pitch is pitch / strideW.
func (pl planes) pitch() int64 {
	need := max(pl.padLf+pl.w, pl.strideW*(pl.outW-1)+pl.dilW*(pl.kw-1)+1)
	return (need + pl.strideW - 1) / pl.strideW * pl.strideW
}

// sets is the number of sets of scratch rows, and rows the rows of
// each: with a row stride of 1, one set of every padded row the output
// reads; else one set of outH rows per kernel row.
func (pl planes) sets() (sets, rows int64) {
	if pl.strideH == 1 {
		return 1, pl.outH + pl.dilH*(pl.kh-1)
	}
	return pl.kh, pl.outH
}

// rowMap says which input row row r of set s holds: scale·r + shift
// (out of range: a padding row, zeros).
func (pl planes) rowMap(s int64) (scale, shift int64) {
	if pl.strideH == 1 {
		return 1, -pl.padTop
	}
	return pl.strideH, s*pl.dilH - pl.padTop
}

// tap is where kernel row i's reads start in the scratch, sets of
// setLen values: its set's first value, plus the rows it is below that
// set's first (rowTap).
func (pl planes) tap(i, setLen int64) int64 {
	if pl.strideH == 1 {
		return pl.rowTap(i)
	}
	return i * setLen
}

// rowTap is how far into its set kernel row i reads: with a row stride
// of 1, i·dilation rows down; else 0, each kernel row having its set.
func (pl planes) rowTap(i int64) int64 {
	if pl.strideH == 1 {
		return i * pl.dilH * pl.pitch()
	}
	return 0
}

// planesHost computes output planes [begin, end).
func (f *fn) planesHost(pl planes, begin, end value.Value) {
	vl := blocking.HostLanes()
	sets, rows := pl.sets()
	pitch, outPitch := pl.pitch(), pl.pitch()/pl.strideW
	// The sums are computed a vector at a time, past the plane's last
	// row up to a whole vector; their reads go up to a kernel row's
	// width and a stride's vector past a set's last row, in columns
	// that are dropped.
	sums := blocking.CeilDiv(outPitch*pl.outH, vl) * vl
	setLen := blocking.CeilDiv(max(rows*pitch, pl.rowTap(pl.kh-1)+pl.strideW*sums)+pl.dilW*(pl.kw-1)+pl.strideW*vl, vl) * vl
	flatLen := blocking.CeilDiv(pl.outH*pl.outW, vl)*vl + vl
	scratch := f.scratch(4*(sets*setLen+sums+flatLen), types.Float)
	at := func(p value.Value, off value.Value) value.Value { return f.b.NewGetElementPtr(types.Float, p, off) }
	f.vectorLoop(i64(0), i64(sets*setLen), func(i value.Value) {
		f.b.NewStore(constant.NewFloat(types.Float, 0), at(scratch, i))
	})
	acc, flat := at(scratch, i64(sets*setLen)), at(scratch, i64(sets*setLen+sums))
	x, w := f.bufs[pl.x], f.bufs[pl.wt]
	f.loop(begin, end, i64(1), func(plane value.Value) {
		o := f.b.NewURem(plane, i64(pl.o))
		n := f.b.NewUDiv(plane, i64(pl.o))
		ch := f.b.NewAdd(f.b.NewMul(n, i64(pl.c)), f.b.NewUDiv(o, i64(pl.mult)))
		f.fillPlane(pl, at(x, f.b.NewMul(ch, i64(pl.h*pl.w))), scratch, setLen)
		f.planeSums(pl, w, o, scratch, acc, setLen, sums)
		f.planeEpilogue(pl, n, o, acc, flat, outPitch)
	})
	f.freeScratch(scratch)
}

// fillPlane copies input plane image into the scratch's sets of rows,
// at column padLf of each row that holds an input row, a vector at a
// time, the last masked (maskedRun: a row of 28 was one vector and 12
// scalar copies); the rest of the scratch stays zero.
func (f *fn) fillPlane(pl planes, image, scratch value.Value, setLen int64) {
	sets, rows := pl.sets()
	for s := range sets {
		// The set's rows that hold input rows: a range, the rows
		// being an increasing function of r.
		scale, shift := pl.rowMap(s)
		first, last := int64(-1), int64(-1)
		for r := range rows {
			if in := scale*r + shift; in >= 0 && in < pl.h {
				last = r
				if first < 0 {
					first = r
				}
			}
		}
		if first < 0 {
			continue
		}
		f.loop(i64(first), i64(last+1), i64(1), func(r value.Value) {
			in := f.b.NewAdd(f.b.NewMul(r, i64(scale)), i64(shift))
			src := f.b.NewGetElementPtr(types.Float, image, f.b.NewMul(in, i64(pl.w)))
			dst := f.b.NewGetElementPtr(types.Float, scratch, f.b.NewAdd(i64(s*setLen+pl.padLf), f.b.NewMul(r, i64(pl.pitch()))))
			f.maskedRun(dst, src, i64(pl.w))
		})
	}
}

// planeSums computes output channel o's sums at the output's row pitch
// into acc, sums of them, a vector at a time in explicit vector code:
// left to LLVM, the loop's neighbouring reads became values carried
// from one iteration to the next (GVN), which its vectoriser refuses.
// Each tap is a fused multiply-add of the weight with the scratch's
// values; a column stride of 2 reads two vectors and keeps the even
// lanes.
func (f *fn) planeSums(pl planes, w, o, scratch, acc value.Value, setLen, sums int64) {
	vl := blocking.HostLanes()
	vec := types.NewVector(uint64(vl), types.Float)
	fma := f.m.declare(fmt.Sprintf("llvm.fma.v%df32", vl), vec, vec, vec, vec)
	splat := make([]int64, vl)
	even := make([]int64, vl)
	for l := range even {
		even[l] = 2 * int64(l)
	}
	weights := make([]value.Value, pl.kh*pl.kw)
	for t := range weights {
		wt := f.b.NewLoad(types.Float, f.b.NewGetElementPtr(types.Float, w, f.b.NewAdd(f.b.NewMul(o, i64(pl.kh*pl.kw)), i64(int64(t)))))
		one := f.b.NewInsertElement(constant.NewUndef(vec), wt, i32(0))
		weights[t] = f.b.NewShuffleVector(one, constant.NewUndef(vec), laneMask(splat))
	}
	load := func(off value.Value) value.Value {
		l := f.b.NewLoad(vec, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, scratch, off), types.NewPointer(vec)))
		l.Align = 4
		return l
	}
	f.loop(i64(0), i64(sums), i64(vl), func(q value.Value) {
		col := f.b.NewMul(q, i64(pl.strideW))
		var sum value.Value = constant.NewZeroInitializer(vec)
		for i := range pl.kh {
			for j := range pl.kw {
				off := f.b.NewAdd(col, i64(pl.tap(i, setLen)+j*pl.dilW))
				v := load(off)
				if pl.strideW == 2 {
					v = f.b.NewShuffleVector(v, load(f.b.NewAdd(off, i64(vl))), laneMask(even))
				}
				sum = f.b.NewCall(fma, weights[i*pl.kw+j], v, sum)
			}
		}
		st := f.b.NewStore(sum, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, acc, q), types.NewPointer(vec)))
		st.Align = 4
	})
}

// laneMask is a shufflevector mask of the given lanes.
func laneMask(lanes []int64) constant.Constant {
	elems := make([]constant.Constant, len(lanes))
	for i, l := range lanes {
		elems[i] = constant.NewInt(types.I32, l)
	}
	return constant.NewVector(types.NewVector(uint64(len(lanes)), types.I32), elems...)
}

// planeEpilogue evaluates the kernel's stages at every element of
// output plane (n, o) and stores them. The sums are first copied from
// acc's row pitch outPitch to the output's, in flat (the scratch after
// acc's sums), a vector at a time (a row's last vector spills into the
// next row's place, written after it); the epilogue then runs as one
// flat run over the plane, in place in flat, and the plane is copied
// to the output.
//
// So LLVM vectorises the epilogue: rows shorter than a vector would
// each be a scalar loop; a flat run reading the sums at a divided
// index had no affine bounds; storing to the output, which LLVM must
// assume may be the bias it reads, was an unsafe dependence. The
// output's rows and columns take their flat index (flatCols).
func (f *fn) planeEpilogue(pl planes, n, o, acc, flat value.Value, outPitch int64) {
	vl := blocking.HostLanes()
	f.loop(i64(0), i64(pl.outH), i64(1), func(i value.Value) {
		from := f.b.NewGetElementPtr(types.Float, acc, f.b.NewMul(i, i64(outPitch)))
		to := f.b.NewGetElementPtr(types.Float, flat, f.b.NewMul(i, i64(pl.outW)))
		for c := int64(0); c < pl.outW; c += vl {
			f.copyVector(f.b.NewGetElementPtr(types.Float, from, i64(c)), f.b.NewGetElementPtr(types.Float, to, i64(c)))
		}
	})
	f.memoryBarrier()
	sum := f.k.Reductions[0]
	vars := f.k.Vars
	f.vars[vars[0]], f.vars[vars[1]] = n, o
	kernelVars := f.kernelVars()
	size := pl.outH * pl.outW
	f.vectorLoop(i64(0), i64(size), func(e value.Value) {
		f.vars[vars[2]], f.vars[vars[3]] = f.b.NewUDiv(e, i64(pl.outW)), f.b.NewURem(e, i64(pl.outW))
		at := f.b.NewGetElementPtr(types.Float, flat, e)
		f.hoisted = map[*tir.Reduce]value.Value{sum: f.toDomain(f.b.NewLoad(types.Float, at), sum.T)}
		f.flatCols = &flatCols{vars: vars[2:], index: e, kernel: kernelVars}
		f.store(flat, e, f.computeStages(), lang.F32)
		f.flatCols = nil
	})
	f.hoisted = nil
	out := f.b.NewGetElementPtr(types.Float, f.bufs[len(f.bufs)-1], f.b.NewMul(f.b.NewAdd(f.b.NewMul(n, i64(pl.o)), o), i64(size)))
	f.maskedRun(out, flat, i64(size))
}

// copyVector copies a host vector of floats from src to dst, neither
// aligned.
func (f *fn) copyVector(src, dst value.Value) {
	vec := types.NewVector(uint64(blocking.HostLanes()), types.Float)
	l := f.b.NewLoad(vec, f.b.NewBitCast(src, types.NewPointer(vec)))
	l.Align = 4
	st := f.b.NewStore(l, f.b.NewBitCast(dst, types.NewPointer(vec)))
	st.Align = 4
}

// memoryBarrier is an empty inline assembly that clobbers memory: LLVM
// moves no load or store across it. Without it, GVN carried the
// compacted sums' first value into the epilogue's loop as a value from
// the previous iteration, and the vectoriser refused the loop.
func (f *fn) memoryBarrier() {
	asm := ir.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void)), "", "~{memory}")
	asm.SideEffect = true
	f.b.NewCall(asm)
}
