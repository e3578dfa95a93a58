package lang_test

import (
	"math"
	"strings"
	"testing"

	"tofuc/lang"
)

var (
	N, M, H, KH = lang.Sym("N"), lang.Sym("M"), lang.Sym("H"), lang.Sym("KH")
	c           = lang.Const
)

func TestDimCanonical(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    lang.Dim
		want string
	}{
		{"zero", lang.Dim{}, "0"},
		{"const", c(7), "7"},
		{"negative const", c(-3), "-3"},
		{"symbol", N, "N"},
		{"negation", N.Neg(), "-N"},
		{"difference", M.Sub(N), "M - N"},
		{"order of terms is canonical", c(1).Add(H).Sub(KH), "H - KH + 1"},
		{"same, built differently", H.Sub(KH).Add(c(1)), "H - KH + 1"},
		{"cancellation", N.Add(M).Sub(N), "M"},
		{"to zero", N.Sub(N), "0"},
		{"scale", N.Add(c(2)).Scale(3), "3*N + 6"},
		{"scale by zero", N.Scale(0), "0"},
		{"product distributes", N.Add(c(1)).Mul(N.Sub(c(1))), "N*N - 1"},
		{"higher degree first", M.Mul(N).Scale(3).Add(N.Mul(N)).Add(M).Add(c(-2)), "3*M*N + N*N + M - 2"},
		{"product commutes", M.Mul(N).Sub(N.Mul(M)), "0"},
		{"product by zero", N.Mul(c(0)), "0"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDimFloorDivMod(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    lang.Dim
		want string
	}{
		{"exact", N.Scale(2).Add(c(4)).FloorDiv(2), "N + 2"},
		{"by one", N.FloorDiv(1), "N"},
		{"not divisible", N.Add(c(1)).FloorDiv(2), "(N + 1)/2"},
		{"divisible part comes out", N.Scale(2).Add(c(3)).FloorDiv(2), "N + 1"},
		{"constant part comes out, remainder stays", N.Add(c(5)).FloorDiv(2), "(N + 1)/2 + 2"},
		{"negative symbol", N.Neg().FloorDiv(2), "(-N)/2"},
		{"constant floors toward -inf", c(-7).FloorDiv(2), "-4"},
		{"constant", c(7).FloorDiv(2), "3"},
		// conv: (H + 2*pad - KH)/stride + 1 with pad = 1, KH = 3, stride = 2
		{"conv output", H.Add(c(2 - 3)).FloorDiv(2).Add(c(1)), "(H + 1)/2"},
		{"ceil", N.CeilDiv(2), "(N + 1)/2"},
		{"ceil constant", c(7).CeilDiv(2), "4"},
		{"ceil exact", N.Scale(4).CeilDiv(4), "N"},
		{"mod symbolic", N.Mod(2), "-2*((N)/2) + N"},
		{"mod constant", c(7).Mod(3), "1"},
		{"mod negative constant is non-negative", c(-7).Mod(3), "2"},
		{"mod divisible", N.Scale(4).Add(c(6)).Mod(2), "0"},
		{"nested divisions merge", N.Max(M).Add(c(1)).FloorDiv(2).FloorDiv(3), "(max(M, N) + 1)/6"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("FloorDiv(0) did not panic")
		}
	}()
	N.FloorDiv(0)
}

func TestDimMaxMin(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    lang.Dim
		want string
	}{
		{"constants", c(3).Max(c(5)), "5"},
		{"constants min", c(3).Min(c(5)), "3"},
		{"same", N.Max(N), "N"},
		{"constant difference", N.Max(N.Add(c(1))), "N + 1"},
		{"constant difference min", N.Min(N.Add(c(1))), "N"},
		{"symbolic", N.Max(M), "max(M, N)"},
		{"symbolic commutes", M.Max(N), "max(M, N)"},
		{"symbolic min", N.Min(M), "min(M, N)"},
		{"in a sum", N.Max(M).Add(c(1)).Scale(2), "2*max(M, N) + 2"},
		{"not constant", N.Max(c(1)), "max(1, N)"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if !N.Max(M).Equal(M.Max(N)) {
		t.Error("max(N, M) != max(M, N)")
	}
}

func TestDimEqualIsConst(t *testing.T) {
	if !N.Add(c(1)).Add(M).Equal(M.Add(c(1).Add(N))) {
		t.Error("N + 1 + M != M + (1 + N)")
	}
	if N.Equal(M) || N.Equal(N.Add(c(1))) {
		t.Error("different dims compare equal")
	}
	for _, tc := range []struct {
		d     lang.Dim
		n     int64
		isCon bool
	}{
		{lang.Dim{}, 0, true},
		{c(-5), -5, true},
		{N.Sub(N).Add(c(2)), 2, true},
		{N, 0, false},
		{N.Add(c(1)), 0, false},
	} {
		n, ok := tc.d.IsConst()
		if n != tc.n || ok != tc.isCon {
			t.Errorf("%s.IsConst() = %d, %v", tc.d, n, ok)
		}
	}
}

func TestDimSubstEval(t *testing.T) {
	conv := H.Sub(KH).Add(c(3)).FloorDiv(2).Add(N.Max(M)) // (H - KH + 3)/2 + max(M, N)
	if got := conv.String(); got != "(H - KH + 1)/2 + max(M, N) + 1" {
		t.Fatalf("conv = %q", got)
	}
	bind := func(m map[string]lang.Dim) func(string) (lang.Dim, bool) {
		return func(s string) (lang.Dim, bool) { d, ok := m[s]; return d, ok }
	}
	for _, tc := range []struct {
		name string
		with map[string]lang.Dim
		want string
	}{
		{"nothing", nil, "(H - KH + 1)/2 + max(M, N) + 1"},
		{"constant", map[string]lang.Dim{"H": c(32), "KH": c(3)}, "max(M, N) + 16"},
		{"all", map[string]lang.Dim{"H": c(32), "KH": c(3), "N": c(4), "M": c(9)}, "25"},
		{"symbol for symbol", map[string]lang.Dim{"H": N.Scale(2), "KH": c(1), "M": N}, "2*N + 1"},
		{"max simplifies", map[string]lang.Dim{"M": N.Add(c(2))}, "(H - KH + 1)/2 + N + 3"},
	} {
		if got := conv.Subst(bind(tc.with)).String(); got != tc.want {
			t.Errorf("Subst %s: %q, want %q", tc.name, got, tc.want)
		}
	}
	n, err := conv.Eval(map[string]int64{"H": 7, "KH": 2, "N": 3, "M": 1})
	if err != nil || n != 3+3+1 {
		t.Errorf("Eval = %d, %v; want 7", n, err)
	}
	// Floor division of a negative value rounds down.
	n, err = H.Sub(KH).FloorDiv(2).Eval(map[string]int64{"H": 1, "KH": 4})
	if err != nil || n != -2 {
		t.Errorf("floor(-3/2) = %d, %v; want -2", n, err)
	}
	n, err = N.Mod(3).Eval(map[string]int64{"N": -4})
	if err != nil || n != 2 {
		t.Errorf("-4 mod 3 = %d, %v; want 2", n, err)
	}
	if _, err := conv.Eval(map[string]int64{"H": 7, "KH": 2, "N": 3}); err == nil || !strings.Contains(err.Error(), "shape symbol M has no value") {
		t.Errorf("Eval with M missing: %v", err)
	}
}

func TestDimSymbolsLinear(t *testing.T) {
	d := H.Sub(KH).FloorDiv(2).Add(N.Max(M)).Add(N)
	if got := strings.Join(d.Symbols(), " "); got != "H KH M N" {
		t.Errorf("Symbols = %s", got)
	}
	coefs, k, ok := N.Scale(3).Sub(M).Add(c(7)).Linear()
	if !ok || k != 7 || coefs["N"] != 3 || coefs["M"] != -1 || len(coefs) != 2 {
		t.Errorf("Linear = %v, %d, %v", coefs, k, ok)
	}
	for _, nl := range []lang.Dim{N.Mul(M), N.FloorDiv(2), N.Max(M)} {
		if _, _, ok := nl.Linear(); ok {
			t.Errorf("%s is not linear", nl)
		}
	}
}

func TestShapeHelpers(t *testing.T) {
	s := []lang.Dim{c(2), N, N.Add(c(1))}
	if got := lang.ShapeString(s); got != "[2, N, N + 1]" {
		t.Errorf("ShapeString = %s", got)
	}
	if !lang.ShapeEqual(s, []lang.Dim{c(2), N, c(1).Add(N)}) || lang.ShapeEqual(s, s[:2]) {
		t.Error("ShapeEqual")
	}
	if _, ok := lang.ConstShape(s); ok {
		t.Error("ConstShape of a symbolic shape")
	}
	if ns, ok := lang.ConstShape([]lang.Dim{c(2), c(3)}); !ok || ns[0] != 2 || ns[1] != 3 {
		t.Errorf("ConstShape = %v, %v", ns, ok)
	}
}

func TestDimOverflow(t *testing.T) {
	const maxInt, minInt = math.MaxInt64, math.MinInt64
	big := c(maxInt)
	for _, tc := range []struct {
		name string
		d    lang.Dim
		want string
	}{
		{"sum", big.Add(c(1)), "overflow"},
		{"negative sum", c(minInt).Sub(c(1)), "overflow"},
		{"product", c(1 << 32).Mul(c(1 << 31)), "overflow"},
		{"scale", N.Scale(1 << 62).Scale(2), "overflow"},
		{"negation of the least int64", c(minInt).Neg(), "overflow"},
		{"product by -1 of the least int64", c(-1).Mul(c(minInt)), "overflow"},
		{"coefficients merge", N.Scale(maxInt).Add(N), "overflow"},
		{"substitution", N.Mul(c(784)).Subst(func(string) (lang.Dim, bool) { return big, true }), "overflow"},
		{"absorbs sums", big.Add(c(1)).Add(N).Sub(big.Add(c(1))), "overflow"},
		{"absorbs division", big.Add(c(1)).Add(N).FloorDiv(2), "overflow"},
		{"absorbs max", big.Add(c(1)).Max(N), "overflow"},
		{"absorbs min of constants", big.Add(c(1)).Min(c(3)), "overflow"},
		{"times zero is zero", big.Add(c(1)).Mul(c(0)), "0"},
		{"the largest int64 is fine", big.Sub(c(1)).Add(c(1)), "9223372036854775807"},
		{"the least int64 is fine", c(minInt + 1).Sub(c(1)), "-9223372036854775808"},
		{"nested divisions whose divisor overflows", N.FloorDiv(1 << 40).FloorDiv(1 << 40), "((N)/1099511627776)/1099511627776"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if tc.d.Overflows() != (tc.want == "overflow") {
			t.Errorf("%s: Overflows() = %v", tc.name, tc.d.Overflows())
		}
		if _, ok := tc.d.IsConst(); ok && tc.d.Overflows() {
			t.Errorf("%s: Overflow is a constant", tc.name)
		}
	}
	if _, err := N.Mul(M).Eval(map[string]int64{"N": 1 << 40, "M": 1 << 40}); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("Eval of an overflowing product: %v", err)
	}
	if lang.Overflow.NonNegative() {
		t.Error("Overflow is provably non-negative")
	}
}
