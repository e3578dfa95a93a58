package cost_test

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tofuc/analysis/cost"
)

// referenceFLOPs are contraction sizes like the calibration's, 0.5 to
// 300 MFLOP.
var referenceFLOPs = []float64{0.53e6, 0.74e6, 1.2e6, 8.3e6, 17e6, 19e6, 20e6, 34e6, 59e6, 128e6, 191e6, 266e6, 302e6}

// TestFitHalfPerformanceRecovers: times made by the model from known
// r∞ and f½ give them back; times of a constant rate give that rate and
// f½ = 0; times off by the same factors either way around the model
// (noise that is a factor) still give r∞ and f½ within a few percent.
func TestFitHalfPerformanceRecovers(t *testing.T) {
	for _, c := range []struct{ rate, half float64 }{{150e9, 3e6}, {1e12, 50e6}, {80e9, 0.2e6}, {120e9, 0}} {
		var seconds []float64
		for _, f := range referenceFLOPs {
			seconds = append(seconds, (f+c.half)/c.rate)
		}
		rate, half, err := cost.FitHalfPerformance(referenceFLOPs, seconds)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(rate/c.rate-1) > 1e-6 || math.Abs(half-c.half) > 1e-6*c.half+1e-3 {
			t.Errorf("exact times of r∞ %g, f½ %g: fitted %g, %g", c.rate, c.half, rate, half)
		}
		// Alternately 20% slow and 20% fast (the same factor), in
		// pairs of neighbouring sizes.
		for i := range seconds {
			if i%2 == 0 {
				seconds[i] *= 1.2
			} else {
				seconds[i] /= 1.2
			}
		}
		rate, half, err = cost.FitHalfPerformance(referenceFLOPs, seconds)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(rate/c.rate-1) > 0.05 || math.Abs(half-c.half) > 0.15*c.half+0.05e6 {
			t.Errorf("noisy times of r∞ %g, f½ %g: fitted %g, %g", c.rate, c.half, rate, half)
		}
	}
	for _, c := range []struct {
		flops, seconds []float64
		want           string
	}{
		{[]float64{1e6, 1e6}, []float64{1e-4, 2e-4}, "two sizes"},
		{[]float64{1e6}, []float64{1e-4, 2e-4}, "1 sizes for 2 times"},
		{[]float64{1e6, 2e6}, []float64{1e-4, 0}, "positive"},
		{[]float64{-1, 2e6}, []float64{1e-4, 1e-4}, "positive"},
	} {
		if _, _, err := cost.FitHalfPerformance(c.flops, c.seconds); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, %v: %v, want %q", c.flops, c.seconds, err, c.want)
		}
	}
}

// linearModel is a linear layer with its ReLU: one contraction kernel.
func linearModel(batch, in, out int) string {
	return "model m(x: f32[" + itoa(batch) + ", " + itoa(in) + "]) {\n    w = param f32[" + itoa(in) + ", " + itoa(out) + "]\n    b = param f32[" + itoa(out) + "]\n    return relu(linear(x, w, b))\n}\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestContractionRate: on a device with a half-performance size, a
// contraction's rate rises with its size towards the peak (a smaller
// one is always slower per FLOP), by Hockney's formula; one whose
// columns are no multiple of the tile pays for the padded ones; an
// element-wise kernel is priced as without the fields.
func TestContractionRate(t *testing.T) {
	dev := cost.Device{PeakFLOPS: 100e9, Bandwidth: 1e15, Launch: 1e-6, HalfFLOPs: 4e6, TileRows: 8, TileCols: 32}
	prev := 0.0
	for _, batch := range []int{32, 64, 128, 256, 1024, 4096} {
		g := graphOf(t, linearModel(batch, 512, 256)).IR
		e, err := cost.Roofline(g, dev)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Kernels) != 1 || e.Kernels[0].Contraction == nil || e.Kernels[0].Padding != 0 {
			t.Fatalf("batch %d: %+v, want one contraction kernel with no padding", batch, e.Kernels)
		}
		f := float64(e.FLOPs)
		// Beyond its compute, the serial bytes: the batch's factor
		// packed (the weights were, with them) and the outputs.
		c := e.Kernels[0].Contraction
		if want := int64(4*batch*512 + 8*batch*256); c.SerialBytes() != want {
			t.Errorf("batch %d: %d serial bytes, want %d", batch, c.SerialBytes(), want)
		}
		rate := f / (e.Time - dev.Launch - float64(c.SerialBytes())/dev.Bandwidth)
		if want := dev.PeakFLOPS * f / (f + dev.HalfFLOPs); math.Abs(rate/want-1) > 1e-9 {
			t.Errorf("batch %d: %g FLOP/s, want r∞·f/(f+f½) = %g", batch, rate, want)
		}
		if rate <= prev || rate >= dev.PeakFLOPS {
			t.Errorf("batch %d: %g FLOP/s, not above the smaller contraction's %g and below the peak", batch, rate, prev)
		}
		prev = rate
	}
	// 40 rows of the batch: the columns (the side other than the
	// weights') are padded to 64; the 256 weight rows are whole tiles.
	g := graphOf(t, linearModel(40, 512, 256)).IR
	e, err := cost.Roofline(g, dev)
	if err != nil {
		t.Fatal(err)
	}
	k := e.Kernels[0]
	if want := (cost.ContractionShape{Batch: 1, Rows: 256, Cols: 40, Depth: 512, RowsPacked: true}); k.Contraction == nil || *k.Contraction != want {
		t.Fatalf("shape %+v, want %+v", k.Contraction, want)
	}
	if want := int64(2 * 512 * 256 * (64 - 40)); k.Padding != want {
		t.Errorf("padding %d FLOPs, want %d", k.Padding, want)
	}
	if want := (float64(k.FLOPs+k.Padding)+dev.HalfFLOPs)/dev.PeakFLOPS + float64(4*40*512+8*40*256)/dev.Bandwidth + dev.Launch; math.Abs(k.Time-want) > 1e-15 {
		t.Errorf("time %g, want %g", k.Time, want)
	}
	// At batch 1 the one column is padded to a tile, unless the device
	// has a narrow kernel for it: then only the 250 rows are, to 256.
	one := graphOf(t, linearModel(1, 512, 250)).IR
	for _, c := range []struct{ narrow, want int64 }{{0, 2 * 512 * (256*32 - 250)}, {4, 2 * 512 * (256 - 250)}} {
		nd := dev
		nd.NarrowCols = c.narrow
		e, err := cost.Roofline(one, nd)
		if err != nil {
			t.Fatal(err)
		}
		if k := e.Kernels[0]; k.Padding != c.want {
			t.Errorf("batch 1, narrow columns %d: padding %d FLOPs, want %d", c.narrow, k.Padding, c.want)
		}
	}
	// An add is no contraction: the fields change nothing.
	add := graphOf(t, "model m(a: f32[4096], b: f32[4096]) {\n    return a + b\n}\n").IR
	plain := dev
	plain.HalfFLOPs, plain.TileRows, plain.TileCols = 0, 0, 0
	plain.Bandwidth = 1e9
	dev.Bandwidth = 1e9
	e1, err := cost.Roofline(add, dev)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := cost.Roofline(add, plain)
	if err != nil {
		t.Fatal(err)
	}
	if e1.Time != e2.Time || e1.Kernels[0].Contraction != nil {
		t.Errorf("an add: %g s with the contraction fields, %g s without", e1.Time, e2.Time)
	}
}

// TestChainedHalfPerformance: on a device that runs chained launches, a
// chained pair of contractions is one launch and pays the
// half-performance size once, as one launch of a contraction does (f½
// is fitted per launch); on one that does not, two of each.
func TestChainedHalfPerformance(t *testing.T) {
	g := graphOf(t, "model m(x: f32[64, 100], w1: f32[100, 200], w2: f32[200, 50]) {\n    return matmul(relu(matmul(x, w1)), w2)\n}\n").IR
	for _, chained := range []bool{true, false} {
		dev := cost.Device{PeakFLOPS: 1e11, Bandwidth: 1e18, Launch: 1e-6, HalfFLOPs: 1e6, ChainedLaunches: chained}
		e, err := cost.Roofline(g, dev)
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		if !chained {
			n = 2
		}
		if e.Launches != n || len(e.Kernels) != 2 {
			t.Fatalf("chained launches %v: %d launches of %d kernels, want %d of 2", chained, e.Launches, len(e.Kernels), n)
		}
		// Each product packs both factors (inputs) and writes its
		// outputs, chained or not.
		serial := float64(4*(64*100+100*200+64*200+200*50)+8*(64*200+64*50)) / dev.Bandwidth
		if want := (float64(e.FLOPs)+float64(n)*dev.HalfFLOPs)/dev.PeakFLOPS + serial + float64(n)*dev.Launch; math.Abs(e.Time/want-1) > 1e-12 {
			t.Errorf("chained launches %v: %g s, want %g (%d f½, %d launches)", chained, e.Time, want, n, n)
		}
	}
}

// TestContractionOf: the row side is the weights' where a factor is
// computed from them, else the smaller side; a sum of squares and a
// plain sum are no contractions.
func TestContractionOf(t *testing.T) {
	for _, c := range []struct {
		src  string
		want *cost.ContractionShape
	}{
		// The weights' side (256) is the rows though the batch (64)
		// is smaller, packed with the weights.
		{linearModel(64, 784, 256), &cost.ContractionShape{Batch: 1, Rows: 256, Cols: 64, Depth: 784, RowsPacked: true}},
		// Two inputs: the smaller side.
		{"model m(a: f32[48, 100], b: f32[100, 20]) {\n    return matmul(a, b)\n}\n", &cost.ContractionShape{Batch: 1, Rows: 20, Cols: 48, Depth: 100}},
		// A convolution: rows the output channels, columns the image.
		{"model m(x: f32[1, 16, 10, 10]) {\n    w = param f32[24, 16, 3, 3]\n    return conv2d<pads = [1, 1, 1, 1]>(x, w)\n}\n", &cost.ContractionShape{Batch: 1, Rows: 24, Cols: 100, Depth: 144, RowsPacked: true}},
		{"model m(a: f32[64, 32]) {\n    return reduce_sum<axes = [1]>(a * a)\n}\n", nil},
		{"model m(a: f32[64, 32]) {\n    return reduce_sum<axes = [1]>(a)\n}\n", nil},
	} {
		g := graphOf(t, c.src).IR
		e, err := cost.Roofline(g, cost.H100)
		if err != nil {
			t.Fatal(err)
		}
		var got *cost.ContractionShape
		for _, k := range e.Kernels {
			if k.Contraction != nil {
				got = k.Contraction
			}
		}
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: shape %+v, want %+v", c.src, got, c.want)
		}
	}
}

// TestTopologyContractionFields: a topology file without the contraction
// fields (every file before them) prices every kernel at peak_flops, as
// before; the fields are read, make a contraction dearer, and are
// checked; the built-in GPU profiles have none.
func TestTopologyContractionFields(t *testing.T) {
	dir := t.TempDir()
	load := func(json string) (*cost.Topology, error) {
		path := filepath.Join(dir, "t.json")
		if err := os.WriteFile(path, []byte(json), 0o644); err != nil {
			t.Fatal(err)
		}
		return cost.LoadTopology(path)
	}
	const device = `"name": "cpu", "peak_flops": 1e11, "memory_bandwidth": 1e10, "memory_bytes": 1000000000, "launch_seconds": 1e-6`
	old, err := load(`{"name": "old", "devices": [{` + device + `}], "links": []}`)
	if err != nil {
		t.Fatal(err)
	}
	g := graphOf(t, linearModel(40, 512, 256)).IR
	sim, err := cost.SimulateOne(g, old)
	if err != nil {
		t.Fatal(err)
	}
	// The roofline as it was: max(FLOPs / peak, bytes / bandwidth) plus
	// the launch, per kernel.
	e, err := cost.Roofline(g, cost.Device{PeakFLOPS: 1, Bandwidth: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for _, k := range e.Kernels {
		want += max(float64(k.FLOPs)/1e11, float64(k.Bytes)/1e10) + 1e-6
	}
	if math.Abs(sim.Seconds-want) > 1e-15 {
		t.Errorf("an old topology: %g s, want %g s", sim.Seconds, want)
	}
	fitted, err := load(`{"name": "new", "devices": [{` + device + `, "contraction_half_flops": 2e6, "contraction_tile": [8, 32], "contraction_narrow_cols": 4}], "links": []}`)
	if err != nil {
		t.Fatal(err)
	}
	if d := fitted.Roofline(0); d.HalfFLOPs != 2e6 || d.TileRows != 8 || d.TileCols != 32 || d.NarrowCols != 4 {
		t.Errorf("the fields read as %+v", d)
	}
	slower, err := cost.SimulateOne(g, fitted)
	if err != nil {
		t.Fatal(err)
	}
	// 40 columns padded to 64, and f½; the serial bytes (the batch's
	// 40 × 512 floats packed, 40 × 256 outputs) besides.
	if want := sim.Seconds + (2*512*256*24+2e6)/1e11 + float64(4*40*512+8*40*256)/1e10; math.Abs(slower.Seconds-want) > 1e-12 {
		t.Errorf("with the fields: %g s, want %g s", slower.Seconds, want)
	}
	for _, bad := range []string{`"contraction_half_flops": -1`, `"contraction_tile": [8]`, `"contraction_tile": [0, 32]`, `"contraction_narrow_cols": -1`} {
		if _, err := load(`{"name": "bad", "devices": [{` + device + `, ` + bad + `}], "links": []}`); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	for _, name := range cost.TopologyNames() {
		for _, d := range cost.Topologies[name].Devices {
			if d.ContractionHalfFLOPs != 0 || d.ContractionTile != nil || d.ContractionNarrowCols != 0 {
				t.Errorf("%s: a GPU profile with the host's contraction fields", name)
			}
		}
	}
}

// TestSerialBytes: a contraction's serial bytes are 4 a float of each
// factor it packs at the launch (not one packed with the weights) and 8
// an output, for every batch index.
func TestSerialBytes(t *testing.T) {
	for _, c := range []struct {
		shape cost.ContractionShape
		want  int64
	}{
		{cost.ContractionShape{Batch: 1, Rows: 32, Cols: 1000, Depth: 1000}, 4*1000*(32+1000) + 8*32*1000},
		{cost.ContractionShape{Batch: 1, Rows: 1000, Cols: 32, Depth: 1000, RowsPacked: true}, 4*1000*32 + 8*32*1000},
		{cost.ContractionShape{Batch: 3, Rows: 8, Cols: 16, Depth: 5, ColsPacked: true}, 3 * (4*5*8 + 8*8*16)},
	} {
		if got := c.shape.SerialBytes(); got != c.want {
			t.Errorf("%+v: %d serial bytes, want %d", c.shape, got, c.want)
		}
	}
	// A GPU profile (no contraction model) hides them behind the FLOPs.
	if got, want := cost.H100.Seconds(1e-3, 1, 1e12), 1e-3; got != want {
		t.Errorf("on an H100: %g s, want %g", got, want)
	}
}
