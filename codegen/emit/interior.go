package emit

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/lang"
	tir "tofuc/lang/ir"
)

// A host kernel's run of its innermost output variable has an interior:
// the values for which every checked read of the kernel's stages is in
// range, for every value of the reductions around the read (a pool's
// window away from the image's border). There the reads need neither
// their checks nor their defaults, so that the loop is plain loads that
// LLVM vectorises (strided ones included); only the border runs keep
// the branch-free selects of access.

// interiorRead is a checked read of an argument whose checked indices
// are affine: in the run, index d is base + inner·u + r with r in
// [rmin, rmax] over the reductions' variables.
type interiorRead struct {
	access *tir.Access
	dims   []interiorDim
}

type interiorDim struct {
	index       tir.Affine
	extent      int64 // of the tensor along the dimension
	inner       int64 // the coefficient of the innermost variable
	rmin, rmax  int64 // the reductions' part
	kernelTerms []tir.AffineTerm
}

// interiorReads are the checked reads of the kernel's stages that the
// interior can drop the checks of: reads of an argument, each checked
// index affine in the kernel's variables (the innermost one with a
// coefficient of at least zero) and the variables of reductions of
// constant extent. Reads inside recomputed locals are not among them.
func (f *fn) interiorReads() []interiorRead {
	inner := f.k.Vars[len(f.k.Vars)-1]
	kernelVar := f.kernelVars()
	reduceExtent := map[*tir.Var]int64{}
	var out []interiorRead
	for _, d := range f.k.Stages {
		tir.Walk(d.Body, func(e tir.Expr) bool {
			if r, ok := e.(*tir.Reduce); ok {
				for _, v := range r.Vars {
					reduceExtent[v] = extent(v)
				}
			}
			return true
		})
	}
	for _, d := range f.k.Stages {
		tir.Walk(d.Body, func(e tir.Expr) bool {
			a, ok := e.(*tir.Access)
			if !ok {
				return true
			}
			src, found := f.k.Source(a.T)
			checked, _ := f.k.Checked(a)
			if !found || src.Arg < 0 || !anyTrue(checked) {
				return true
			}
			read := interiorRead{access: a}
			for dim, c := range checked {
				if !c {
					continue
				}
				af, affine := tir.AffineOf(a.Index[dim], nil)
				if _, constant := af.Const.IsConst(); !affine || !constant {
					return true
				}
				id := interiorDim{index: af, extent: f.k.Args[src.Arg].Shape[dim]}
				for _, t := range af.Terms {
					v := t.Var
					kv, isKernel := kernelVar[v]
					switch n, isReduce := reduceExtent[v]; {
					case kv == inner:
						id.inner = t.Coef
					case isReduce:
						id.rmin += min(0, t.Coef*(n-1))
						id.rmax += max(0, t.Coef*(n-1))
					case isKernel:
						id.kernelTerms = append(id.kernelTerms, tir.AffineTerm{Var: kv, Coef: t.Coef})
					default:
						return true
					}
				}
				if id.inner < 0 {
					return true
				}
				read.dims = append(read.dims, id)
			}
			out = append(out, read)
			return true
		})
	}
	return out
}

// kernelVars maps the kernel's variables, and every stage's, which
// stand for the kernel's by position, to the kernel's.
func (f *fn) kernelVars() map[*tir.Var]*tir.Var {
	m := map[*tir.Var]*tir.Var{}
	for _, v := range f.k.Vars {
		m[v] = v
	}
	for _, d := range f.k.Stages {
		for j, v := range d.Vars {
			m[v] = f.k.Vars[j]
		}
	}
	return m
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

// interior is the part [lo, hi) of a run of n values of the innermost
// variable, from its bound value, where every read of reads is in range.
func (f *fn) interior(reads []interiorRead, n value.Value) (lo, hi value.Value) {
	inner := f.k.Vars[len(f.k.Vars)-1]
	// endPos is ⌊x/s⌋ + 1 for x ≥ 0, else 0: the end of the values
	// u ≥ 0 with s·u ≤ x.
	endPos := func(x value.Value, s int64) value.Value {
		q := f.b.NewAdd(f.b.NewSDiv(x, i64(s)), i64(1))
		return f.b.NewSelect(f.b.NewICmp(enum.IPredSGE, x, i64(0)), q, i64(0))
	}
	lo, hi = i64(0), n
	for _, r := range reads {
		for _, d := range r.dims {
			c, _ := d.index.Const.IsConst()
			var base value.Value = f.b.NewAdd(i64(c), f.b.NewMul(f.vars[inner], i64(d.inner)))
			for _, t := range d.kernelTerms {
				base = f.b.NewAdd(base, f.b.NewMul(f.vars[t.Var], i64(t.Coef)))
			}
			low := f.b.NewAdd(base, i64(d.rmin))                               // the least index at u = 0
			room := f.b.NewSub(i64(d.extent-1), f.b.NewAdd(base, i64(d.rmax))) // what the largest may grow
			if d.inner == 0 {
				in := f.b.NewAnd(f.b.NewICmp(enum.IPredSGE, low, i64(0)), f.b.NewICmp(enum.IPredSGE, room, i64(0)))
				hi = f.b.NewSelect(in, hi, i64(0))
				continue
			}
			lo = f.smax(lo, f.ceilPos(f.b.NewSub(i64(0), low), d.inner))
			hi = f.smin(hi, endPos(room, d.inner))
		}
	}
	lo = f.smin(lo, n)
	return lo, f.smax(hi, lo)
}

// storeRuns stores the kernel's elements [begin, end) in runs of its
// innermost variable, each run's interior (where reads has a read) with
// those reads unchecked.
func (f *fn) storeRuns(begin, end value.Value, reads []interiorRead) {
	out := f.bufs[len(f.bufs)-1]
	inner := f.k.Vars[len(f.k.Vars)-1]
	unchecked := map[*tir.Access]bool{}
	for _, r := range reads {
		unchecked[r.access] = true
	}
	f.forRuns(begin, f.b.NewSub(end, begin), f.k.Vars, func(t, run value.Value) {
		z0 := f.vars[inner]
		part := func(lo, hi value.Value) {
			f.vectorLoop(lo, hi, func(u value.Value) {
				f.vars[inner] = f.b.NewAdd(z0, u)
				f.store(out, f.b.NewAdd(begin, f.b.NewAdd(t, u)), f.computeStages(), f.k.Out().DType)
			})
		}
		if len(reads) == 0 {
			part(i64(0), run)
			return
		}
		lo, hi := f.interior(reads, run)
		f.unchecked = unchecked
		part(lo, hi)
		f.unchecked = nil
		// The two borders, [0, lo) then [hi, run), through one copy of
		// the checked body.
		f.loop(i64(0), i64(2), i64(1), func(side value.Value) {
			second := f.b.NewICmp(enum.IPredEQ, side, i64(1))
			part(f.b.NewSelect(second, hi, i64(0)), f.b.NewSelect(second, run, lo))
		})
	})
}

// mergedRuns stores elements [begin, end) of a kernel with no checked
// reads to make unchecked, in runs of its last variables merged until
// a run is at least mergedRun elements (or is every variable): rows
// shorter than a vector would each be a scalar loop (an EfficientNet's
// SiLU over 672 channels of 14 × 14 took 0.5 ms for 131,712 elements).
// A read whose last indices are the merged variables takes the run's
// flat index (flatCols); others divide it into the variables, which
// LLVM vectorises too.
func (f *fn) mergedRuns(begin, end value.Value) {
	vars := f.k.Vars
	merged, span := 1, extent(vars[len(vars)-1])
	for merged < len(vars) && span < mergedRun() {
		merged++
		span *= extent(vars[len(vars)-merged])
	}
	if merged == 1 {
		f.storeRuns(begin, end, nil)
		return
	}
	last := vars[len(vars)-merged:]
	group := &tir.Var{Name: "run", Extent: lang.Const(span)}
	runVars := append(append([]*tir.Var(nil), vars[:len(vars)-merged]...), group)
	kernelVars := f.kernelVars()
	out := f.bufs[len(f.bufs)-1]
	f.forRuns(begin, f.b.NewSub(end, begin), runVars, func(t, run value.Value) {
		s0 := f.vars[group]
		f.vectorLoop(i64(0), run, func(u value.Value) {
			flat := f.b.NewAdd(s0, u)
			f.unflatten(flat, last, extents(last))
			f.flatCols = &flatCols{vars: last, index: flat, kernel: kernelVars}
			f.store(out, f.b.NewAdd(begin, f.b.NewAdd(t, u)), f.computeStages(), f.k.Out().DType)
			f.flatCols = nil
		})
	})
}

// mergedRun is the shortest run mergedRuns makes: eight vectors.
func mergedRun() int64 { return 8 * blocking.HostLanes() }
