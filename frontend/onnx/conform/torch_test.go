package conform

import (
	"path/filepath"
	"testing"

	"tofuc/codegen/toolchain"
	"tofuc/pipeline"
)

// TestTorchExports runs models as PyTorch 1.13 exports them (written by
// `python3 scripts/export_models.py DIR --tests --models
// unet,gpt2_blocks,gru`, torch's outputs as the expected values): a
// U-Net upsampling bilinearly and by nearest neighbour (Resize), two
// GPT-2 blocks with a dynamic batch (a fused QKV projection split three
// ways, a causal mask), a two-layer GRU. Each passes on the interpreter
// and on the cpu backend.
func TestTorchExports(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "torch", "*"))
	if err != nil || len(paths) < 3 {
		t.Fatalf("the torch exports are missing (%d found): %v", len(paths), err)
	}
	check := func(name string, outcomes []Outcome) {
		for _, o := range outcomes {
			if o.Status != Pass {
				t.Errorf("%s: %s", name, o.Line())
			}
		}
	}
	check("interp", runAll(t, paths))
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	b, err := pipeline.NewBackend("cpu", nil, pipeline.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("cpu", runOn(t, paths, b))
}
