package lang

// DimAlgebra says how to build a value of type T from each form a Dim's
// canonical expression takes; FoldDim applies it bottom-up. It lets passes
// outside this package (the SMT encoder, for one) read a Dim's structure.
type DimAlgebra[T any] struct {
	Const    func(n int64) T
	Sym      func(name string) T
	Add      func(a, b T) T
	Mul      func(a, b T) T
	FloorDiv func(a T, c int64) T // c > 0
	Max, Min func(a, b T) T
}

// FoldDim rebuilds d in the algebra alg. d must not be Overflow (it has no
// value; the checker rejects the shapes that hold it).
func FoldDim[T any](d Dim, alg DimAlgebra[T]) T {
	out := alg.Const(0)
	for i, t := range d.terms {
		p := alg.Const(t.coef)
		for _, f := range t.factors {
			p = alg.Mul(p, foldAtom(f, alg))
		}
		if i == 0 {
			out = p
		} else {
			out = alg.Add(out, p)
		}
	}
	return out
}

func foldAtom[T any](f atom, alg DimAlgebra[T]) T {
	switch f.kind {
	case atomSym:
		return alg.Sym(f.sym)
	case atomDiv:
		return alg.FloorDiv(FoldDim(f.a, alg), f.c)
	case atomMax:
		return alg.Max(FoldDim(f.a, alg), FoldDim(f.b, alg))
	default:
		return alg.Min(FoldDim(f.a, alg), FoldDim(f.b, alg))
	}
}
