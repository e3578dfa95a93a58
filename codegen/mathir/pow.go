package mathir

import (
	"math"

	"github.com/llir/llvm/ir/constant"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"
)

// pow is math.Pow: Go's special cases (chosen with sel, on a branch
// away from the loop), else |y| = yi + yf with |yf| <= 0.5, x**yf as
// exp(yf*log(x)) and x**yi by repeated squaring of x's mantissa with the
// exponent kept apart, 1/result for negative y, and one ldexp.
func pow(g *fnb, x, y value.Value) value.Value {
	if c, ok := y.(*constant.Float); ok && !c.NaN {
		if yv, _ := c.X.Float64(); math.Abs(yv) < 1<<powUnrolled {
			return powConstY(g, x, yv)
		}
	}
	// Pow(-Inf, y) is Pow(-0, -y) in Go (a recursive call).
	negInf := g.isInf(x, -1)
	x = g.sel(negInf, g.k(math.Copysign(0, -1)), x)
	y = g.sel(negInf, g.neg(y), y)

	yi := g.trunc(g.fabs(y))
	yf := g.sub(g.fabs(y), yi)
	special, sv := g.powSpecial(x, y, yi, yf)
	return g.ifElse(special, func() value.Value { return sv }, func() value.Value {
		return g.powFinite(x, y, yi, yf)
	})
}

// powUnrolled bounds the integer part of a constant exponent whose
// squaring loop powConstY unrolls (one step per bit).
const powUnrolled = 6

// powConstY is pow for a constant y with |y| < 2**powUnrolled, without
// a branch, so that a loop calling it can be vectorised: what depends on
// y alone is decided here (Go's cases on y, the reduction of yf to
// [-0.5, 0.5], x**yf's presence), Go's special cases on x and the general
// path are both computed and chosen with select, and the squaring loop
// is unrolled over yi's bits, its early exit kept as a flag. The bits are
// math.Pow's.
func powConstY(g *fnb, x value.Value, y float64) value.Value {
	yi, yf := math.Modf(math.Abs(y))
	special, sv := g.powSpecial(x, g.k(y), g.k(yi), g.k(yf))
	if yf > 0.5 {
		yf--
		yi++
	}
	a1 := g.k(1)
	if yf != 0 {
		a1 = g.call("exp", g.mul(g.k(yf), g.call("log", x)))
	}
	x1, xe := g.frexp(x)
	var ae, done value.Value = g.i(0), constant.False
	for i := int64(yi); i != 0; i >>= 1 {
		outside := g.and(g.not(done), g.or(g.islt(xe, g.i(-1<<12)), g.isgt(xe, g.i(1<<12))))
		ae = g.sel(outside, g.iadd(ae, xe), ae)
		done = g.or(done, outside)
		if i&1 == 1 {
			a1 = g.sel(done, a1, g.mul(a1, x1))
			ae = g.sel(done, ae, g.iadd(ae, xe))
		}
		x1n, xen := g.mul(x1, x1), g.shl(xe, g.i(1))
		low := g.lt(x1n, g.k(0.5))
		x1n = g.sel(low, g.add(x1n, x1n), x1n)
		xen = g.sel(low, g.isub(xen, g.i(1)), xen)
		x1, xe = g.sel(done, x1, x1n), g.sel(done, xe, xen)
	}
	if y < 0 {
		a1 = g.div(g.k(1), a1)
		ae = g.isub(g.i(0), ae)
	}
	// Pow(-Inf, y) is Pow(-0, -y) in Go: a constant here.
	r := g.sel(special, sv, g.ldexp(a1, ae))
	return g.sel(g.isInf(x, -1), g.k(math.Pow(math.Inf(-1), y)), r)
}

// powSpecial tells whether math.Pow(x, y) is one of Go's special cases,
// and its value there; yi and yf are Modf(|y|).
func (g *fnb) powSpecial(x, y, yi, yf value.Value) (special, v value.Value) {
	negZero := g.and(g.signbit(x), g.isOddInt(y)) // for x = ±0
	// Go's result for y = ±Inf and for |y| >= 2**63: 0 where |x| < 1
	// and y is positive, or |x| > 1 and y negative.
	vanish := func(yPositive value.Value) value.Value {
		return g.choose(
			g.eq(x, g.k(-1)), g.k(1),
			g.ieq(g.lt(g.fabs(x), g.k(1)), yPositive), g.k(0),
			g.inf(1))
	}
	cv := []value.Value{
		g.or(g.eq(y, g.k(0)), g.eq(x, g.k(1))), g.k(1),
		g.eq(y, g.k(1)), x,
		g.or(g.isNaN(x), g.isNaN(y)), g.nan(),
		g.and(g.eq(x, g.k(0)), g.lt(y, g.k(0))), g.sel(negZero, g.inf(-1), g.inf(1)),
		g.and(g.eq(x, g.k(0)), g.gt(y, g.k(0))), g.sel(negZero, x, g.k(0)),
		g.isInf(y, 0), vanish(g.isInf(y, 1)),
		g.isInf(x, 0), g.sel(g.lt(y, g.k(0)), g.k(0), g.inf(1)), // +Inf: -Inf was rewritten
		g.eq(y, g.k(0.5)), g.sqrt(x),
		g.eq(y, g.k(-0.5)), g.div(g.k(1), g.sqrt(x)),
		g.and(g.ne(yf, g.k(0)), g.lt(x, g.k(0))), g.nan(),
		g.ge(yi, g.k(twoTo63)), vanish(g.gt(y, g.k(0))),
	}
	special = cv[0]
	for i := 2; i < len(cv); i += 2 {
		special = g.or(special, cv[i])
	}
	return special, g.choose(append(cv, g.nan())...)
}

// isOddInt is Go's isOddInt: y is an odd integer below 2**53.
func (g *fnb) isOddInt(y value.Value) value.Value {
	inRange := g.lt(g.fabs(y), g.k(twoTo53))
	yi := g.trunc(g.sel(inRange, y, g.k(0)))
	odd := g.ieq(g.iand(g.int(yi), g.i(1)), g.i(1))
	return g.and(inRange, g.and(g.eq(y, yi), odd))
}

// powFinite is math.Pow's general path for finite nonzero x, finite y
// with |y| < 2**63 and x >= 0 unless y is an integer.
func (g *fnb) powFinite(x, y, yi, yf value.Value) value.Value {
	// x**yf, with yf moved to [-0.5, 0.5].
	over := g.gt(yf, g.k(0.5))
	yf = g.sel(over, g.sub(yf, g.k(1)), yf)
	yi = g.sel(over, g.add(yi, g.k(1)), yi)
	a1 := g.when(g.ne(yf, g.k(0)), func() value.Value {
		return g.call("exp", g.mul(yf, g.call("log", x)))
	}, g.k(1))

	// x**yi: for each bit of yi, square x1 (renormalized into [0.5, 1)
	// with its exponent xe apart) and multiply it into a1 where the bit
	// is set; stop once xe leaves ±4096, where the result is 0 or Inf.
	x1, xe := g.frexp(x)
	i0 := g.int(yi)
	entry, head, body, step, exit := g.b, g.block(), g.block(), g.block(), g.block()
	entry.NewBr(head)
	phi := func(v value.Value) *ir.InstPhi { return head.NewPhi(ir.NewIncoming(v, entry)) }
	i, x1p, xep, a1p, aep := phi(i0), phi(x1), phi(xe), phi(a1), phi(g.i(0))
	g.b = head
	head.NewCondBr(g.ine(i, g.i(0)), body, exit)

	g.b = body
	outside := g.or(g.islt(xep, g.i(-1<<12)), g.isgt(xep, g.i(1<<12)))
	aeOut := g.iadd(aep, xep)
	body.NewCondBr(outside, exit, step)

	g.b = step
	bit := g.ieq(g.iand(i, g.i(1)), g.i(1))
	a1n := g.sel(bit, g.mul(a1p, x1p), a1p)
	aen := g.sel(bit, g.iadd(aep, xep), aep)
	x1n := g.mul(x1p, x1p)
	xen := g.shl(xep, g.i(1))
	low := g.lt(x1n, g.k(0.5))
	x1n = g.sel(low, g.add(x1n, x1n), x1n)
	xen = g.sel(low, g.isub(xen, g.i(1)), xen)
	next := g.ashr(i, g.i(1))
	for _, e := range []struct {
		phi *ir.InstPhi
		v   value.Value
	}{{i, next}, {x1p, x1n}, {xep, xen}, {a1p, a1n}, {aep, aen}} {
		e.phi.Incs = append(e.phi.Incs, ir.NewIncoming(e.v, step))
	}
	step.NewBr(head)

	// Leaving by the exponent test adds xe once more.
	g.b = exit
	a1 = exit.NewPhi(ir.NewIncoming(a1p, head), ir.NewIncoming(a1p, body))
	ae := exit.NewPhi(ir.NewIncoming(aep, head), ir.NewIncoming(aeOut, body))
	neg := g.lt(y, g.k(0))
	a1 = g.sel(neg, g.div(g.k(1), a1), a1)
	aeFinal := g.sel(neg, g.isub(g.i(0), ae), ae)
	return g.ldexp(a1, aeFinal)
}
