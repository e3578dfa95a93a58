package dynamic

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

func TestChunks(t *testing.T) {
	r := &Runner{Manifest: &Manifest{Sizes: []Size{{N: 1}, {N: 8}, {N: 64}}}}
	for _, tc := range []struct {
		n    int64
		want []chunk
	}{
		{1, []chunk{{0, 1, 1}}},
		{7, []chunk{{0, 7, 8}}},
		{64, []chunk{{0, 64, 64}}},
		{65, []chunk{{0, 64, 64}, {64, 1, 1}}},
		{100, []chunk{{0, 64, 64}, {64, 36, 64}}},
		{136, []chunk{{0, 64, 64}, {64, 64, 64}, {128, 8, 8}}},
	} {
		if got := r.chunks(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("chunks(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// A chunk's inputs hold its samples, then copies of its last; its
// outputs go back to their samples' places, whatever the axis and the
// rows per sample.
func TestChunkInputsAndOutputs(t *testing.T) {
	// x: [2, 3·batch] (batch along dimension 1, 3 per sample), 5 samples.
	a := Axis{Name: "x", Dim: 1, Factor: 3}
	x := tensor.New(lang.F32, []int{2, 15})
	for i := range x.Len() {
		x.SetFlat(i, float64(i))
	}
	r := &Runner{Manifest: &Manifest{Sizes: []Size{{N: 2}, {N: 4}}, Inputs: []Axis{a}, Outputs: []Axis{a}}}
	out := r.allocate(map[string]*tensor.Tensor{"x": tensor.New(lang.F32, []int{2, 12})}, 5)
	for _, c := range r.chunks(5) {
		part := r.chunkInputs(map[string]*tensor.Tensor{"x": x}, c)["x"]
		if part.Shape[1] != int(3*c.size) {
			t.Fatalf("chunk %v: shape %v", c, part.Shape)
		}
		for s := range c.size {
			from := c.start + min(s, c.count-1)
			for row := range 2 {
				for k := range 3 {
					if got, want := part.At(row, int(3*s)+k), x.At(row, int(3*from)+k); got != want {
						t.Fatalf("chunk %v: sample %d: %v, want %v", c, s, got, want)
					}
				}
			}
		}
		r.placeOutputs(out, map[string]*tensor.Tensor{"x": part}, c)
	}
	if err := tensor.Compare(out["x"], x, tensor.Exact); err != nil {
		t.Fatalf("the chunks' outputs joined: %v", err)
	}
}

// A damaged or edited manifest is refused, naming the file.
func TestManifestFaults(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{Model: "m", Symbol: "batch", Sizes: []Size{{N: 1}, {N: 4}}, Inputs: []Axis{{Name: "x", Dim: 0, Factor: 1}}}
	m.Sizes[0].Plan.Path, m.Sizes[1].Plan.Path = "batch-1/plan.json", "batch-4/plan.json"
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ManifestFile)
	good, _ := os.ReadFile(path)
	for _, tc := range []struct{ edit, want string }{
		{strings.Replace(string(good), `"n": 4`, `"n": 5`, 1), "changed after tofuc compile wrote it"},
		{string(good[:len(good)/2]), "unexpected end"},
	} {
		if err := os.WriteFile(path, []byte(tc.edit), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	for _, bad := range []*Manifest{
		{Sizes: []Size{{N: 4, Plan: m.Sizes[1].Plan}, {N: 1, Plan: m.Sizes[0].Plan}}},
		{Sizes: []Size{{N: 1}}},
		{Sizes: []Size{{N: 1, Plan: m.Sizes[0].Plan}}, Inputs: []Axis{{Name: "x", Dim: 0}}},
	} {
		if err := bad.Write(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(dir); err == nil {
			t.Errorf("%+v was read", bad)
		}
	}
}
