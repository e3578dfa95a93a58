package codegen

import (
	"fmt"
	"testing"

	"tofuc/lang"
	"tofuc/lang/precision"
)

// TestReductionKernelArguments: a reduce step's kernel takes the parts in
// the step's order, then the result, for every reducer (the GPU runtime
// passes Parts[i] as argument i, and the fold's order decides which of
// +0 and -0, or which NaN, a max keeps).
func TestReductionKernelArguments(t *testing.T) {
	for _, reducer := range []string{"sum", "prod", "max", "min"} {
		b := newBuilder("m", 2, precision.Exact)
		idx, err := b.reductionKernel(reducer, lang.F32, []int64{4, 3}, 3)
		if err != nil {
			t.Fatal(reducer, err)
		}
		k := b.units[idx]
		if len(k.Args) != 4 {
			t.Fatalf("%s: %d arguments, want 3 parts and the result", reducer, len(k.Args))
		}
		for i, a := range k.Args[:3] {
			if fmt.Sprint(a.Key) != fmt.Sprint(reductionKey{k.Label, i}) {
				t.Errorf("%s: argument %d is %v, want part %d", reducer, i, a.Key, i)
			}
		}
	}
}
