package peak

import (
	"testing"
	"time"

	"tofuc/codegen/toolchain"
)

// TestMeasure: the probe compiles and reports a rate between what any
// host this code runs on must reach (1 GFLOP/s a thread) and what none
// can (a 5 GHz core retiring four 16-lane FMAs a cycle).
func TestMeasure(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	r, err := Measure(1, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	if r.FLOPS < 1e9 || r.FLOPS > 5e9*4*16*2 {
		t.Errorf("peak %g FLOP/s is not plausible", r.FLOPS)
	}
}
