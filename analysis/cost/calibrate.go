package cost

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"tofuc/lang/ir"
	"tofuc/lang/precision"
)

// The reference models of `tofuc bench --calibrate`: typical layers of
// CNNs and MLPs, none a layer of the models the simulation is checked
// against (docs/partition.md).
var (
	// Contractions of 0.5 to 300 MFLOP with their epilogues, of shapes
	// as varied as the layers of CNNs and MLPs: 3×3 and 1×1
	// convolutions over large and small images, deep and shallow;
	// linear layers of many and of few rows, deep and shallow, wide and
	// narrow; and the tiny matmul below. Their times fit the
	// half-performance model (cost.FitHalfPerformance).
	calibrationContractions = []string{`model conv3(x: f32[1, 96, 40, 40]) {
    w = param f32[96, 96, 3, 3] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w))
    return y
}`, `model conv1(x: f32[1, 192, 20, 20]) {
    w = param f32[384, 192, 1, 1] init he()
    y = relu(conv2d(x, w))
    return y
}`, `model thin3(x: f32[1, 24, 96, 96]) {
    w = param f32[32, 24, 3, 3] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w))
    return y
}`, `model deep3(x: f32[1, 384, 6, 6]) {
    w = param f32[768, 384, 3, 3] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w))
    return y
}`, `model shallow1(x: f32[1, 48, 36, 36]) {
    w = param f32[160, 48, 1, 1] init he()
    y = relu(conv2d(x, w))
    return y
}`, `model linear(x: f32[256, 768]) {
    w = param f32[768, 768] init glorot()
    b = param f32[768] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model small(x: f32[64, 512]) {
    w = param f32[512, 256] init glorot()
    b = param f32[256] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model fewrows(x: f32[16, 1024]) {
    w = param f32[1024, 1024] init glorot()
    b = param f32[1024] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model manyrows(x: f32[1000, 64]) {
    w = param f32[64, 64] init glorot()
    b = param f32[64] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model deep(x: f32[48, 2000]) {
    w = param f32[2000, 100] init glorot()
    b = param f32[100] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model narrow(x: f32[300, 50]) {
    w = param f32[50, 40] init glorot()
    b = param f32[40] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model tiny(x: f32[96, 160]) {
    w = param f32[160, 24] init glorot()
    b = param f32[24] init zeros()
    y = relu(linear(x, w, b))
    return y
}`}
	// An add of 64 MiB tensors: its kernel gives the memory bandwidth.
	calibrationAdd = `model add(a: f32[4096, 4096], b: f32[4096, 4096]) {
    c = a + b
    return c
}`
	// Kernels too small for their work to count: their runs give a
	// step's fixed cost beyond its kernels, the add's kernel the fixed
	// cost of a kernel, and the matmul's kernel is the smallest of the
	// reference contractions.
	calibrationTinyAdd = `model tinyadd(a: f32[256], b: f32[256]) {
    c = a + b
    return c
}`
	calibrationTinyMatmul = `model tinymatmul(a: f32[64, 64], b: f32[64, 64]) {
    c = relu(matmul(a, b))
    return c
}`
	// A sum of a 4 MiB input (a batch of images or of token vectors):
	// the rest of its run, beyond the fixed cost, copies the input in.
	calibrationCopy = `model copy(a: f32[1024, 1024]) {
    s = reduce_sum<axes = [0, 1]>(a)
    return s
}`
)

// CalibratedMath are the math functions whose calls --calibrate prices
// (TopologyDevice.MathSeconds): the costly ones (ir.CostlyFunc), library
// routines of tens of operations, but pow. A pow's cost depends on its
// exponent 350-fold: a constant one gets a routine of its own without
// branches (codegen/mathir), an integer one squares, and the general
// one took 48 ns a call, so that one measured cost overpriced Adam's
// updates tenfold. The rest (pow, abs, sqrt, floor, max, …) count as
// one operation, as every call did before.
var CalibratedMath = slices.DeleteFunc(ir.CostlyFuncs(), func(fn string) bool { return fn == "pow" })

// mathArgs are where the math reference model calls each function: four
// calls an element on values that differ (so that its kernel computes
// more than it reads or writes) and are spread as the input is.
var mathArgs = []string{"x", "-x", "0.5 * x", "0.75 * x"}

// mathCall is a call of fn on X within its domain: the inputs are drawn
// from N(0, 1).
func mathCall(fn string) string {
	switch fn {
	case "log", "acosh":
		return fn + "(abs(X) + 1.0)"
	case "asin", "acos", "atanh":
		return fn + "(min(max(X, -0.99), 0.99))"
	case "atan2":
		return "atan2(X, abs(x) + 0.5)"
	}
	return fn + "(X)"
}

// MathOutput is the output of the math reference model that calls fn.
func MathOutput(fn string) string { return "m_" + fn }

// CalibrationMathSource is the math reference model: for each function
// of CalibratedMath, an output (MathOutput) that calls it four times on
// each of 2¹⁸ values, its own kernel.
func CalibrationMathSource() string {
	var lines, outs []string
	for _, fn := range CalibratedMath {
		var terms []string
		for _, a := range mathArgs {
			terms = append(terms, strings.ReplaceAll(mathCall(fn), "X", a))
		}
		lines = append(lines, fmt.Sprintf("    %s = %s\n", MathOutput(fn), strings.Join(terms, " + ")))
		outs = append(outs, MathOutput(fn))
	}
	return fmt.Sprintf("model math(x: f32[262144]) {\n%s    return %s\n}", strings.Join(lines, ""), strings.Join(outs, ", "))
}

// MathModes are the precision modes whose math costs --calibrate
// measures: the exact mode computes f32 values' functions in double,
// the others in f32 where the math library has an f32 form (exp, log,
// tanh, sigmoid, erf: codegen/mathir) and in double otherwise; the f32
// mode's costs stand for the others'.
var MathModes = []precision.Mode{precision.Exact, precision.F32}

// mathModeKey is the key of TopologyDevice.MathSeconds whose costs a
// plan of mode m pays.
func mathModeKey(m precision.Mode) string {
	if m.InF32() {
		return precision.F32.String()
	}
	return precision.Exact.String()
}

// CalibrationSources are the reference models of a calibration, in the
// order Calibrate times them: the large add, the tiny add, the tiny
// matmul, the copy, then the contractions.
func CalibrationSources() []string {
	return append([]string{calibrationAdd, calibrationTinyAdd, calibrationTinyMatmul, calibrationCopy}, calibrationContractions...)
}

// Timing is a reference model's measured run: the median seconds of a
// run, and the seconds its kernels took in that run.
type Timing struct {
	Median, Kernels float64
}

// Calibration is what Calibrate needs: the reference models' graphs (in
// CalibrationSources' order), how to time model i, how many rounds to
// time them in, the host contraction's micro-kernel tile (rows,
// columns) and its narrow kernel's most columns, and where to write each
// reference contraction's time and model (nil: nowhere).
type Calibration struct {
	Graphs []*ir.Graph
	Time   func(i int) (Timing, error)
	// MathGraph is the math reference model (CalibrationMathSource),
	// and TimeMath times it compiled in a mode of MathModes: the median
	// run's kernel seconds by the output they compute; nil: math calls
	// are not priced.
	MathGraph  *ir.Graph
	TimeMath   func(mode precision.Mode) (map[string]float64, error)
	Rounds     int
	Tile       []int64
	NarrowCols int64
	Log        io.Writer
}

// Calibrate fits d's measured fields to the reference models' times
// (docs/partition.md, "Simulated step time"). Every model is timed in
// c.Rounds rounds, each round timing all of them in turn, and the round
// of its median kernel time kept: on a shared machine one round can be
// off by half, and the machine's speed drifts, so that each model's
// median is drawn from the whole calibration, not from one stretch of
// it. Then:
//   - MemoryBandwidth: the large add's bytes over its kernel's time;
//   - LaunchSeconds: what the tiny add's kernel takes beyond its
//     roofline time (an element-wise kernel's fixed cost), or all of it
//     where the roofline, at memory's bandwidth, exceeds it;
//   - StepSeconds: the smaller of the tiny models' runs beyond their
//     kernels (the runtime's fixed cost per step);
//   - PeakFLOPS and ContractionHalfFLOPs: Hockney's r∞ and f½ fitted to
//     the reference contractions' kernels beyond their launch and their
//     serial bytes (FitHalfPerformance; ContractionShape.SerialBytes);
//   - IOBandwidth: the copy model's input over the rest of its run
//     beyond its kernel and the fixed cost.
func Calibrate(d *TopologyDevice, c Calibration) error {
	if len(c.Graphs) != len(CalibrationSources()) {
		return fmt.Errorf("%d graphs for %d reference models", len(c.Graphs), len(CalibrationSources()))
	}
	ms := make([]*measured, len(c.Graphs))
	for i, g := range c.Graphs {
		m := &measured{name: g.Name}
		var err error
		if m.est, err = Roofline(g, Device{PeakFLOPS: 1, Bandwidth: 1}); err != nil {
			return err
		}
		for _, in := range g.Inputs {
			m.inputBytes += ValueBytes(in)
		}
		ms[i] = m
	}
	rounds := make([][]Timing, len(ms))
	for range max(1, c.Rounds) {
		for i := range ms {
			t, err := c.Time(i)
			if err != nil {
				return err
			}
			rounds[i] = append(rounds[i], t)
		}
	}
	for i, m := range ms {
		slices.SortFunc(rounds[i], func(x, y Timing) int { return cmp.Compare(x.Kernels, y.Kernels) })
		m.Timing = rounds[i][len(rounds[i])/2]
		m.Kernels = math.Max(m.Kernels, 1e-12)
	}
	add, tinyAdd, tinyMatmul, cp := ms[0], ms[1], ms[2], ms[3]
	d.MemoryBandwidth = float64(add.est.Bytes) / add.Kernels
	// The add's FLOPs are no more than its bytes: its roofline is its
	// memory time.
	fixed := tinyAdd.Kernels - float64(tinyAdd.est.Bytes)/d.MemoryBandwidth
	if fixed <= 0 {
		// The tiny add's few bytes sit in cache, which the large add's
		// bandwidth (memory's, lower still on a loaded host) does not
		// describe: its whole time is fixed cost.
		fixed = tinyAdd.Kernels
	}
	d.LaunchSeconds = fixed / float64(max(1, tinyAdd.est.Launches))
	// A step costs what the cheaper tiny run took beyond its kernels
	// (the one with the least to copy).
	d.StepSeconds = min(max(0, tinyAdd.Median-tinyAdd.Kernels), max(0, tinyMatmul.Median-tinyMatmul.Kernels))
	refs := append([]*measured{tinyMatmul}, ms[4:]...)
	// Each reference is one contraction kernel (its epilogue fused):
	// its compute is its kernel's time beyond the launch and its serial
	// bytes, for its FLOPs padded to the host micro-kernel's tiles.
	d.ContractionTile, d.ContractionNarrowCols = c.Tile, c.NarrowCols
	var flops, seconds []float64
	padding := make([]int64, len(refs))
	for i, m := range refs {
		if len(m.est.Kernels) != 1 || m.est.Kernels[0].Contraction == nil {
			return fmt.Errorf("the reference contraction %s is not one contraction kernel", m.name)
		}
		padding[i] = m.est.Kernels[0].Contraction.Padding(d.ContractionTile[0], d.ContractionTile[1], d.ContractionNarrowCols)
		flops = append(flops, float64(m.est.FLOPs+padding[i]))
		seconds = append(seconds, m.computeSeconds(d.LaunchSeconds, d.MemoryBandwidth))
	}
	var err error
	if d.PeakFLOPS, d.ContractionHalfFLOPs, err = FitHalfPerformance(flops, seconds); err != nil {
		return err
	}
	dev := Device{PeakFLOPS: d.PeakFLOPS, HalfFLOPs: d.ContractionHalfFLOPs}
	for i, m := range refs {
		if c.Log != nil {
			fmt.Fprintf(c.Log, "calibrate: %-10s %8.2f MFLOP (%7.2f padded) computed in %8.3f ms (%6.1f GFLOP/s), model %8.3f ms\n",
				m.name, float64(m.est.FLOPs)/1e6, flops[i]/1e6, seconds[i]*1e3, float64(m.est.FLOPs)/seconds[i]/1e9, dev.ComputeSeconds(m.est.FLOPs, padding[i], 1)*1e3)
		}
	}
	if rest := cp.Median - cp.Kernels - d.StepSeconds; rest > 0 {
		d.IOBandwidth = float64(cp.inputBytes) / rest
	} // else 0: not modelled (the copy lost in the noise)
	return calibrateMath(d, c)
}

// calibrateMath sets d.MathSeconds from the math reference model,
// timed in c.Rounds rounds in each of MathModes, each function's median
// kernel time kept. A call's cost is its kernel's time beyond the
// launch, over its calls, less the one operation it counts as; 0 where
// the kernel took no longer than its bytes at the memory's bandwidth
// (its calls cost less than the memory around them, which the
// roofline's max prices already).
func calibrateMath(d *TopologyDevice, c Calibration) error {
	if c.TimeMath == nil {
		return nil
	}
	g := c.MathGraph
	elems := int64(1)
	for _, dim := range g.Inputs[0].Shape {
		n, _ := dim.IsConst()
		elems *= n
	}
	memory := float64(8*elems) / d.MemoryBandwidth // an f32 read and written
	d.MathSeconds = map[string]map[string]float64{}
	for _, mode := range MathModes {
		times := map[string][]float64{}
		for range max(1, c.Rounds) {
			kernels, err := c.TimeMath(mode)
			if err != nil {
				return err
			}
			for _, fn := range CalibratedMath {
				times[fn] = append(times[fn], kernels[MathOutput(fn)])
			}
		}
		costs := map[string]float64{}
		for _, fn := range CalibratedMath {
			calls, err := graphMathCalls(g, fn)
			if err != nil {
				return err
			}
			if calls == 0 {
				return fmt.Errorf("the math reference model calls no %s", fn)
			}
			slices.Sort(times[fn])
			kernel := times[fn][len(times[fn])/2]
			if kernel <= 0 {
				return fmt.Errorf("the math reference model's %s took no time: no kernel of that output was timed", MathOutput(fn))
			}
			costs[fn] = 0 // memory-bound at four calls an element
			if compute := kernel - d.LaunchSeconds; compute > memory {
				costs[fn] = max(0, compute/float64(calls)-1/d.PeakFLOPS)
			}
			if c.Log != nil {
				fmt.Fprintf(c.Log, "calibrate: %-5s %-7s %8.3f ms for %d calls: %6.2f ns a call\n", mode, fn, kernel*1e3, calls, costs[fn]*1e9)
			}
		}
		d.MathSeconds[mathModeKey(mode)] = costs
	}
	return nil
}

// graphMathCalls counts the calls of math function fn that g's
// operators make.
func graphMathCalls(g *ir.Graph, fn string) (int64, error) {
	var total int64
	for _, n := range g.Nodes {
		for _, ds := range [][]*ir.Def{n.Inst.Locals, n.Inst.Outputs} {
			for _, d := range ds {
				c, err := DefMathCalls(d, fn, nil)
				if err != nil {
					return 0, err
				}
				total += c
			}
		}
	}
	return total, nil
}

// measured is a reference model's kept timing (its median round), its
// roofline sizes and the bytes of its inputs.
type measured struct {
	Timing
	name       string
	est        *Estimate
	inputBytes int64
}

// computeSeconds is a reference contraction's kernel time beyond its
// launch and its serial bytes at bandwidth (ContractionShape.SerialBytes),
// at least a hundredth of the kernel's time (a kernel lost in the noise
// of the launch counts as that).
func (m *measured) computeSeconds(launch, bandwidth float64) float64 {
	serial := float64(m.est.Kernels[0].Contraction.SerialBytes()) / bandwidth
	return max(m.Kernels/100, m.Kernels-launch*float64(max(1, m.est.Launches))-serial)
}
