package interp

import (
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// The vector path evaluates a float Def a block at a time and a vector
// closure returns the n values of its expression for the block in a buffer
// of its own. A block is f.nh rows of f.w elements: element j = bh*f.w + jw
// has the innermost Def variable (the row variable) at f.v[row] + jw and,
// when the rows are short enough to be grouped (blk >= 0), the next
// variable (the block variable) at f.v[blk] + bh; otherwise f.nh is 1 and
// the row is a segment of at most maxRow elements. The loops of a Reduce run outside the
// row, so every element is still accumulated in row-major order of the
// reduction variables: the results are bit-identical to the scalar path.
// Expressions that do not mention the row variable are evaluated once per
// call as scalars ("uniform"); nodes without a vector form (Select, && and
// ||, integer arithmetic, Opaque, ...) fall back to their scalar closure
// element by element, which keeps their laziness.

// maxRow bounds the number of elements of a block.
const maxRow = 512

// vfexpr returns the values for j in [0, n) in a buffer owned by the node.
type vfexpr func(f *frame, n int) []float64

// vcode is a compiled float expression on the vector path: either uniform
// (the same for the whole row, computed by sf) or a vector v.
type vcode struct {
	v  vfexpr
	sf fexpr
}

func (c *compiler) newBuf() int {
	c.nbuf++
	return c.nbuf - 1
}

// dependsOnRow reports whether e mentions the row variable.
func (c *compiler) dependsOnRow(e ir.Expr) bool {
	dep := false
	ir.Walk(e, func(x ir.Expr) bool {
		if r, ok := x.(*ir.VarRef); ok {
			if s, ok := c.slots[r.V]; ok && (s == c.row || s == c.blk) {
				dep = true
			}
		}
		return !dep
	})
	return dep
}

// vector turns any vcode into a vector.
func (c *compiler) vector(x vcode) vfexpr {
	if x.v != nil {
		return x.v
	}
	id, s := c.newBuf(), x.sf
	return func(f *frame, n int) []float64 {
		out := f.fb[id][:n]
		v := s(f)
		for j := range out {
			out[j] = v
		}
		return out
	}
}

// vfallback evaluates the scalar closure element by element.
func (c *compiler) vfallback(e ir.Expr) (vcode, error) {
	x, err := c.compile(e)
	if err != nil {
		return vcode{}, err
	}
	s := asFloat(x, e.Type())
	id, row, blk := c.newBuf(), c.row, c.blk
	return vcode{v: func(f *frame, n int) []float64 {
		out := f.fb[id][:n]
		f.each(row, blk, func(j int) { out[j] = s(f) })
		return out
	}}, nil
}

// each sets the row and block variables to each element of the block in
// turn and calls fn with the element's position; it restores them after.
func (f *frame) each(row, blk int, fn func(j int)) {
	k0 := f.v[row]
	h0 := int64(0)
	if blk >= 0 {
		h0 = f.v[blk]
	}
	j := 0
	for bh := range f.nh {
		if blk >= 0 {
			f.v[blk] = h0 + int64(bh)
		}
		for jw := range f.w {
			f.v[row] = k0 + int64(jw)
			fn(j)
			j++
		}
	}
	f.v[row] = k0
	if blk >= 0 {
		f.v[blk] = h0
	}
}

// vcompile compiles a float expression on the vector path.
func (c *compiler) vcompile(e ir.Expr) (vcode, error) {
	if !c.dependsOnRow(e) {
		x, err := c.compile(e)
		if err != nil {
			return vcode{}, err
		}
		return vcode{sf: asFloat(x, e.Type())}, nil
	}
	if !e.Type().IsFloat() {
		return c.vfallback(e)
	}
	switch e := e.(type) {
	case *ir.Access:
		if v, ok, err := c.vaccess(e); ok || err != nil {
			return vcode{v: v}, err
		}
	case *ir.Binary:
		if e.L.Type().IsFloat() && e.R.Type().IsFloat() && e.Op <= ir.OpDiv {
			return c.vbinary(e)
		}
	case *ir.Unary:
		if e.Op == "-" && e.X.Type().IsFloat() {
			return c.vmap(e.X, func(x float64) float64 { return -x })
		}
	case *ir.Cast:
		if e.X.Type().IsFloat() {
			if e.T == lang.F64 {
				return c.vcompile(e.X)
			}
			t := e.T
			return c.vmap(e.X, t.RoundFloat)
		}
	case *ir.Call:
		if fn, _ := ir.FloatFunc(e.Fn); fn != nil && e.Fn != "isnan" && e.Fn != "isinf" && e.Args[0].Type().IsFloat() {
			return c.vmap(e.Args[0], fn)
		}
	case *ir.Reduce:
		if e.Body.Type().IsFloat() {
			return c.vreduce(e)
		}
	}
	return c.vfallback(e)
}

// vmap applies fn to every element of x.
func (c *compiler) vmap(x ir.Expr, fn func(float64) float64) (vcode, error) {
	a, err := c.vcompile(x)
	if err != nil {
		return vcode{}, err
	}
	va, id := c.vector(a), c.newBuf()
	return vcode{v: func(f *frame, n int) []float64 {
		out := f.fb[id][:n]
		for j, v := range va(f, n) {
			out[j] = fn(v)
		}
		return out
	}}, nil
}

func (c *compiler) vbinary(e *ir.Binary) (vcode, error) {
	l, err := c.vcompile(e.L)
	if err != nil {
		return vcode{}, err
	}
	r, err := c.vcompile(e.R)
	if err != nil {
		return vcode{}, err
	}
	id := c.newBuf()
	op := e.Op
	switch {
	case l.v != nil && r.v != nil:
		a, b := l.v, r.v
		return vcode{v: func(f *frame, n int) []float64 {
			out := f.fb[id][:n]
			x, y := a(f, n), b(f, n)
			x, y = x[:len(out)], y[:len(out)]
			switch op {
			case ir.OpAdd:
				for j := range out {
					out[j] = x[j] + y[j]
				}
			case ir.OpSub:
				for j := range out {
					out[j] = x[j] - y[j]
				}
			case ir.OpMul:
				for j := range out {
					out[j] = x[j] * y[j]
				}
			default:
				for j := range out {
					out[j] = x[j] / y[j]
				}
			}
			return out
		}}, nil
	case l.v != nil:
		a, s := l.v, r.sf
		return vcode{v: func(f *frame, n int) []float64 {
			out := f.fb[id][:n]
			x := a(f, n)[:len(out)]
			y := s(f)
			switch op {
			case ir.OpAdd:
				for j := range out {
					out[j] = x[j] + y
				}
			case ir.OpSub:
				for j := range out {
					out[j] = x[j] - y
				}
			case ir.OpMul:
				for j := range out {
					out[j] = x[j] * y
				}
			default:
				for j := range out {
					out[j] = x[j] / y
				}
			}
			return out
		}}, nil
	}
	s, b := l.sf, r.v
	return vcode{v: func(f *frame, n int) []float64 {
		out := f.fb[id][:n]
		x := s(f)
		y := b(f, n)[:len(out)]
		switch op {
		case ir.OpAdd:
			for j := range out {
				out[j] = x + y[j]
			}
		case ir.OpSub:
			for j := range out {
				out[j] = x - y[j]
			}
		case ir.OpMul:
			for j := range out {
				out[j] = x * y[j]
			}
		default:
			for j := range out {
				out[j] = x / y[j]
			}
		}
		return out
	}}, nil
}

func (c *compiler) vreduce(e *ir.Reduce) (vcode, error) {
	slots, exts, err := c.bind(e.Vars, lang.Pos{})
	if err != nil {
		return vcode{}, err
	}
	defer c.unbind(slots)
	// A sum of a vector times a uniform value is fused into one loop
	// (acc += float64(x*s) rounds exactly as acc += (x*s) does).
	var (
		mulV vfexpr
		mulS fexpr
		bv   vfexpr
	)
	if b, ok := e.Body.(*ir.Binary); ok && e.Kind == ir.Sum && b.Op == ir.OpMul && b.L.Type().IsFloat() && b.R.Type().IsFloat() {
		l, err := c.vcompile(b.L)
		if err != nil {
			return vcode{}, err
		}
		r, err := c.vcompile(b.R)
		if err != nil {
			return vcode{}, err
		}
		switch {
		case l.v != nil && r.v == nil:
			mulV, mulS = l.v, r.sf
		case l.v == nil && r.v != nil:
			mulV, mulS = r.v, l.sf
		}
	}
	if mulV == nil {
		body, err := c.vcompile(e.Body)
		if err != nil {
			return vcode{}, err
		}
		bv = c.vector(body)
	}
	for _, n := range exts {
		if n <= 0 {
			exts, slots = []int64{0}, slots[:1]
			break
		}
	}
	id := c.newBuf()
	var identity float64
	switch e.Kind {
	case ir.Prod:
		identity = 1
	case ir.Max:
		identity = math.Inf(-1)
	case ir.Min:
		identity = math.Inf(1)
	}
	kind := e.Kind
	return vcode{v: func(f *frame, n int) []float64 {
		acc := f.fb[id][:n]
		for j := range acc {
			acc[j] = identity
		}
		step := func() {
			if mulV != nil {
				x, s := mulV(f, n)[:len(acc)], mulS(f)
				for j := range acc {
					acc[j] += float64(x[j] * s)
				}
				return
			}
			x := bv(f, n)[:len(acc)]
			switch kind {
			case ir.Sum:
				for j := range acc {
					acc[j] += x[j]
				}
			case ir.Prod:
				for j := range acc {
					acc[j] *= x[j]
				}
			case ir.Max:
				for j, v := range x {
					if v > acc[j] || v != v {
						acc[j] = v
					}
				}
			default:
				for j, v := range x {
					if v < acc[j] || v != v {
						acc[j] = v
					}
				}
			}
		}
		forEach(f, slots, exts, step)
		return acc
	}}, nil
}

// forEach sets the variables to every tuple in row-major order and calls
// step.
func forEach(f *frame, slots []int, exts []int64, step func()) {
	switch len(slots) {
	case 0:
		step()
		return
	case 1:
		s0, e0 := slots[0], exts[0]
		for i := int64(0); i < e0; i++ {
			f.v[s0] = i
			step()
		}
		return
	}
	var idx [8]int64
	for d, s := range slots {
		f.v[s] = 0
		if d < len(idx) {
			idx[d] = 0
		}
	}
	if len(slots) > len(idx) {
		loop(slots, exts, func(*frame) float64 { return 0 }, f, func(float64) { step() })
		return
	}
	last, el := slots[len(slots)-1], exts[len(slots)-1]
	for {
		for i := int64(0); i < el; i++ {
			f.v[last] = i
			step()
		}
		d := len(slots) - 2
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < exts[d] {
				f.v[slots[d]] = idx[d]
				break
			}
			idx[d] = 0
			f.v[slots[d]] = 0
		}
		if d < 0 {
			return
		}
	}
}

// jRange returns the j in [0, n) with 0 <= s + r*j < e, an interval.
func jRange(s, r, e int64, n int) (lo, hi int64) {
	lo, hi = 0, int64(n)
	switch {
	case e <= 0:
		return 0, 0
	case r == 0:
		if s < 0 || s >= e {
			return 0, 0
		}
	case r == 1:
		lo, hi = max(lo, -s), min(hi, e-s)
	case r > 0:
		lo = max(lo, ceilDiv(-s, r))
		hi = min(hi, floorDiv(e-1-s, r)+1)
	default:
		hi = min(hi, floorDiv(s, -r)+1)
		lo = max(lo, ceilDiv(s-(e-1), -r))
	}
	if lo >= hi {
		return 0, 0
	}
	return lo, hi
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// vdim is a dimension of a vector access: its index at element (bh, jw)
// is s(f) + rh*bh + r*jw.
type vdim struct {
	s      iexpr
	r, rh  int64
	extent int64
	stride int64
	dim    int
}

// vaccess compiles an access to a float tensor whose indices are all
// affine; ok is false otherwise.
func (c *compiler) vaccess(e *ir.Access) (vfexpr, bool, error) {
	t, err := c.tensor(e.T, e.Pos)
	if err != nil {
		return nil, false, err
	}
	if !t.DType.IsFloat() || len(e.Index) != len(t.Shape) || t.DType != e.T.DType {
		return nil, false, nil
	}
	strides := t.Strides()
	folded := ir.Affine{Const: lang.Const(0)}
	var checked []vdim
	for d, x := range e.Index {
		ia, ok := c.affineOf(x)
		if !ok {
			return nil, false, nil
		}
		st, ext := int64(strides[d]), int64(t.Shape[d])
		if c.inRange(ia, ext) {
			folded = folded.Add(ia.Scale(st))
			continue
		}
		a := c.slotted(ia)
		checked = append(checked, vdim{s: a.eval(), r: a.coef(c.row), rh: a.coef(c.blk), extent: ext, stride: st, dim: d})
	}
	flat := c.slotted(folded)
	var def fexpr
	defUniform := true
	if e.Default != nil {
		dc, err := c.compileTo(e.Default, t.DType)
		if err != nil {
			return nil, false, err
		}
		def = dc.f
		defUniform = !c.dependsOnRow(e.Default)
	}
	base, step, hstep := flat.eval(), flat.coef(c.row), flat.coef(c.blk)
	for _, d := range checked {
		step += d.r * d.stride
		hstep += d.rh * d.stride
	}
	data, id, row, blk, shape := t.F, c.newBuf(), c.row, c.blk, t.Shape
	return func(f *frame, n int) []float64 {
		out := f.fb[id][:n]
		var sbuf [8]int64
		var s []int64
		if len(checked) <= len(sbuf) {
			s = sbuf[:len(checked)]
		} else {
			s = make([]int64, len(checked))
		}
		off0 := base(f)
		for i, d := range checked {
			s[i] = d.s(f)
			off0 += s[i] * d.stride
		}
		w, nh := int64(f.w), int64(f.nh)
		// Dimensions that depend on the block variable only bound the
		// rows, those that depend on the row variable only bound the
		// columns of every row; mixed ones are handled row by row.
		blo, bhi, jlo, jhi, mixed := int64(0), nh, int64(0), w, false
		for i := range checked {
			d := &checked[i]
			switch {
			case d.r == 0:
				l, h := jRange(s[i], d.rh, d.extent, int(nh))
				blo, bhi = max(blo, l), min(bhi, h)
			case d.rh == 0:
				l, h := jRange(s[i], d.r, d.extent, int(w))
				jlo, jhi = max(jlo, l), min(jhi, h)
			default:
				mixed = true
			}
		}
		var dv float64
		dvSet := false
		for bh := int64(0); bh < nh; bh++ {
			row0 := out[bh*w : (bh+1)*w]
			lo, hi := jlo, jhi
			if bh < blo || bh >= bhi {
				lo, hi = 0, 0
			} else if mixed {
				for i := range checked {
					if d := &checked[i]; d.r != 0 && d.rh != 0 {
						l, h := jRange(s[i]+d.rh*bh, d.r, d.extent, int(w))
						lo, hi = max(lo, l), min(hi, h)
					}
				}
			}
			if lo >= hi {
				lo, hi = 0, 0
			}
			if lo > 0 || hi < w {
				if def == nil {
					j := hi
					if lo > 0 {
						j = 0
					}
					for i, d := range checked {
						if x := s[i] + d.rh*bh + d.r*j; x < 0 || x >= d.extent {
							fail(outOfRange(e, shape, checkedDim{extent: d.extent, dim: d.dim}, x))
						}
					}
				}
				if defUniform {
					if !dvSet {
						dv, dvSet = def(f), true
					}
					for j := int64(0); j < lo; j++ {
						row0[j] = dv
					}
					for j := hi; j < w; j++ {
						row0[j] = dv
					}
				} else {
					k0 := f.v[row]
					h0 := int64(0)
					if blk >= 0 {
						h0 = f.v[blk]
						f.v[blk] = h0 + bh
					}
					for j := int64(0); j < w; j++ {
						if j >= lo && j < hi {
							continue
						}
						f.v[row] = k0 + j
						row0[j] = def(f)
					}
					f.v[row] = k0
					if blk >= 0 {
						f.v[blk] = h0
					}
				}
			}
			seg := row0[lo:hi]
			if len(seg) == 0 {
				continue
			}
			off := off0 + bh*hstep + lo*step
			switch step {
			case 0:
				v := data[off]
				for j := range seg {
					seg[j] = v
				}
			case 1:
				src := data[off : off+int64(len(seg))]
				if len(seg) >= 32 {
					copy(seg, src)
				} else {
					for j := range seg {
						seg[j] = src[j]
					}
				}
			default:
				for j := range seg {
					seg[j] = data[off]
					off += step
				}
			}
		}
		return out
	}, true, nil
}

// coef is the coefficient of slot s in a.
func (a affine) coef(s int) int64 {
	for i, t := range a.slots {
		if t == s {
			return a.coefs[i]
		}
	}
	return 0
}
