package npy

import (
	"path/filepath"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// TestAsDType: a bf16 tensor written as f32 reads back as the same bf16
// tensor; other dtypes are left alone.
func TestAsDType(t *testing.T) {
	x := tensor.FromFloats(lang.BF16, []int{3}, []float64{1.5, -0.0078125, 3e38})
	path := filepath.Join(t.TempDir(), "x.npy")
	if err := WriteFile(path, x); err != nil {
		t.Fatal(err)
	}
	y, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if y.DType != lang.F32 {
		t.Fatalf("read as %s", y.DType)
	}
	if err := tensor.Compare(AsDType(y, lang.BF16), x, tensor.Exact); err != nil {
		t.Error(err)
	}
	if AsDType(y, lang.F32) != y {
		t.Error("an f32 tensor read as f32 was converted")
	}
}
