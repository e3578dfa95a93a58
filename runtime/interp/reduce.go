package interp

import (
	"fmt"
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
)

func (c *compiler) reduce(e *ir.Reduce) (code, error) {
	slots, exts, err := c.bind(e.Vars, lang.Pos{})
	if err != nil {
		return code{}, err
	}
	body, err := c.compileTo(e.Body, e.T)
	c.unbind(slots)
	if err != nil {
		return code{}, err
	}
	for _, n := range exts {
		if n <= 0 {
			exts = []int64{0} // an empty range: the loops never run
			slots = slots[:1]
			break
		}
	}
	if e.T.IsFloat() {
		return code{f: reduceFloat(e.Kind, slots, exts, body.f)}, nil
	}
	return code{i: reduceInt(e.Kind, e.T, slots, exts, body.i)}, nil
}

// loop calls step(v) for the body's value v at every index tuple, in
// row-major order.
func loop[T float64 | int64](slots []int, exts []int64, body func(*frame) T, f *frame, step func(T)) {
	if len(slots) == 1 {
		s0, e0 := slots[0], exts[0]
		for i := int64(0); i < e0; i++ {
			f.v[s0] = i
			step(body(f))
		}
		return
	}
	forEach(f, slots, exts, func() { step(body(f)) })
}

func reduceFloat(kind ir.Reducer, slots []int, exts []int64, body fexpr) fexpr {
	switch kind {
	case ir.Sum:
		if len(slots) == 1 {
			s0, e0 := slots[0], exts[0]
			return func(f *frame) float64 {
				acc := 0.0
				for i := int64(0); i < e0; i++ {
					f.v[s0] = i
					acc += body(f)
				}
				return acc
			}
		}
		if len(slots) == 2 {
			s0, e0, s1, e1 := slots[0], exts[0], slots[1], exts[1]
			return func(f *frame) float64 {
				acc := 0.0
				for i := int64(0); i < e0; i++ {
					f.v[s0] = i
					for j := int64(0); j < e1; j++ {
						f.v[s1] = j
						acc += body(f)
					}
				}
				return acc
			}
		}
		if len(slots) == 3 {
			s0, e0, s1, e1, s2, e2 := slots[0], exts[0], slots[1], exts[1], slots[2], exts[2]
			return func(f *frame) float64 {
				acc := 0.0
				for i := int64(0); i < e0; i++ {
					f.v[s0] = i
					for j := int64(0); j < e1; j++ {
						f.v[s1] = j
						for k := int64(0); k < e2; k++ {
							f.v[s2] = k
							acc += body(f)
						}
					}
				}
				return acc
			}
		}
		return func(f *frame) float64 {
			acc := 0.0
			loop(slots, exts, body, f, func(v float64) { acc += v })
			return acc
		}
	case ir.Prod:
		return func(f *frame) float64 {
			acc := 1.0
			loop(slots, exts, body, f, func(v float64) { acc *= v })
			return acc
		}
	case ir.Max:
		return func(f *frame) float64 {
			acc := math.Inf(-1)
			loop(slots, exts, body, f, func(v float64) {
				if v > acc || v != v {
					acc = v
				}
			})
			return acc
		}
	case ir.Min:
		return func(f *frame) float64 {
			acc := math.Inf(1)
			loop(slots, exts, body, f, func(v float64) {
				if v < acc || v != v {
					acc = v
				}
			})
			return acc
		}
	}
	return func(*frame) float64 { fail(fmt.Errorf("unknown reducer %v", kind)); return 0 }
}

// intRange is the smallest and largest value of an integer or bool dtype.
func intRange(t lang.DType) (lo, hi int64) {
	switch {
	case t == lang.Bool:
		return 0, 1
	case t == lang.U64:
		return 0, -1 // as bit patterns
	case t.IsSigned():
		b := t.Bits()
		return -1 << (b - 1), 1<<(b-1) - 1
	}
	return 0, 1<<t.Bits() - 1
}

func reduceInt(kind ir.Reducer, t lang.DType, slots []int, exts []int64, body iexpr) iexpr {
	lo, hi := intRange(t)
	less := func(a, b int64) bool { return a < b }
	if t == lang.U64 {
		less = func(a, b int64) bool { return uint64(a) < uint64(b) }
	}
	switch kind {
	case ir.Sum:
		return func(f *frame) int64 {
			var acc int64
			loop(slots, exts, body, f, func(v int64) { acc += v })
			return t.WrapInt(acc)
		}
	case ir.Prod:
		return func(f *frame) int64 {
			acc := int64(1)
			loop(slots, exts, body, f, func(v int64) { acc *= v })
			return t.WrapInt(acc)
		}
	case ir.Max:
		return func(f *frame) int64 {
			acc := lo
			loop(slots, exts, body, f, func(v int64) {
				if less(acc, v) {
					acc = v
				}
			})
			return acc
		}
	case ir.Min:
		return func(f *frame) int64 {
			acc := hi
			loop(slots, exts, body, f, func(v int64) {
				if less(v, acc) {
					acc = v
				}
			})
			return acc
		}
	}
	return func(*frame) int64 { fail(fmt.Errorf("unknown reducer %v", kind)); return 0 }
}
