package executor

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// Stats summarise repeated measurements, in seconds.
type Stats struct {
	Min    float64 `json:"min_seconds"`
	Median float64 `json:"median_seconds"`
	Mean   float64 `json:"mean_seconds"`
}

func statsOf(seconds []float64) Stats {
	if len(seconds) == 0 {
		return Stats{}
	}
	s := slices.Clone(seconds)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	mid := s[len(s)/2]
	if len(s)%2 == 0 {
		mid = (s[len(s)/2-1] + mid) / 2
	}
	return Stats{Min: s[0], Median: mid, Mean: sum / float64(len(s))}
}

// KernelTiming is the time of one launch of a plan (a launch step, or a
// reduce step's kernel), measured with events on its device's stream.
type KernelTiming struct {
	Device int    `json:"device"`
	Step   int    `json:"step"`
	Label  string `json:"label"` // the kernel's label
	Kernel string `json:"kernel"`
	Kind   string `json:"kind"`
	Grid   int64  `json:"grid"`
	Block  int64  `json:"block"`
	FLOPs  int64  `json:"flops"`
	Bytes  int64  `json:"bytes"`
	Time   Stats  `json:"time"`
	// GFLOPS and GBps are the kernel's FLOPs and bytes over its median
	// time, in 10^9 per second.
	GFLOPS float64 `json:"gflops"`
	GBps   float64 `json:"gbps"`
}

// Timing is what Bench measured.
type Timing struct {
	Runs int `json:"runs"`
	// Plan is the wall time of the plan's steps on all devices, inputs
	// and parameters already on the devices and outputs left there.
	Plan    Stats          `json:"plan"`
	Kernels []KernelTiming `json:"kernels"`
}

// Bench runs the plan runs times to time it as a whole, then runs times
// more with events around every launch to time the kernels. The inputs
// and parameters are written once, before.
func (pr *Program) Bench(inputs, params map[string]*tensor.Tensor, runs int) (*Timing, error) {
	if runs < 1 {
		return nil, fmt.Errorf("benchmark of %d runs", runs)
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err := pr.prepareRun(inputs, params); err != nil {
		return nil, err
	}
	if err := pr.placeOnDevices(); err != nil {
		return nil, err
	}
	if err := pr.run(pr.steps, nil); err != nil { // a warm-up
		return nil, err
	}
	res := &Timing{Runs: runs}
	walls := make([]float64, runs)
	for i := range walls {
		start := time.Now()
		if err := pr.run(pr.steps, nil); err != nil {
			return nil, err
		}
		walls[i] = time.Since(start).Seconds()
	}
	res.Plan = statsOf(walls)
	t, err := pr.newTimer()
	if err != nil {
		return nil, err
	}
	times := map[plan.StepRef][]float64{}
	for range runs {
		if err := pr.run(pr.steps, t); err != nil {
			return nil, err
		}
		for ref, start := range t.start {
			ms, err := pr.devs[ref.Device].Elapsed(start, t.end[ref])
			if err != nil {
				return nil, err
			}
			times[ref] = append(times[ref], ms/1e3)
		}
	}
	for _, ref := range pr.steps.order {
		if seconds, ok := times[ref]; ok {
			res.Kernels = append(res.Kernels, pr.kernelTiming(ref, statsOf(seconds)))
		}
	}
	slices.SortFunc(res.Kernels, func(a, b KernelTiming) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Step, b.Step))
	})
	return res, nil
}

// StepTime is how long a launch (or a library call) of the last Run
// with Timing set took.
type StepTime struct {
	Device, Step int
	Kernel       int // its index in the plan (-1: a library step)
	Label        string
	Seconds      float64
}

// runTimed runs the steps, between timing events around every launch
// when Timing is set, and keeps the launches' times for StepTimes.
func (pr *Program) runTimed() error {
	if !pr.Timing {
		return pr.run(pr.steps, nil)
	}
	if pr.timer == nil {
		var err error
		if pr.timer, err = pr.newTimer(); err != nil {
			return err
		}
	}
	if err := pr.run(pr.steps, pr.timer); err != nil {
		return err
	}
	pr.times = pr.times[:0]
	for _, ref := range pr.steps.order {
		start, ok := pr.timer.start[ref]
		if !ok {
			continue
		}
		ms, err := pr.devs[ref.Device].Elapsed(start, pr.timer.end[ref])
		if err != nil {
			return err
		}
		st := StepTime{Device: ref.Device, Step: ref.Step, Kernel: -1, Label: pr.steps.steps[ref.Device][ref.Step].Label, Seconds: ms / 1e3}
		if l := pr.steps.ops[ref.Device][ref.Step].launch; l != nil {
			st.Kernel, st.Label = l.k, pr.Plan.Kernels[l.k].Label
		}
		pr.times = append(pr.times, st)
	}
	slices.SortFunc(pr.times, func(a, b StepTime) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Step, b.Step))
	})
	return nil
}

// StepTimes lists the launches of the last Run with Timing set and how
// long each took, in device and step order.
func (pr *Program) StepTimes() []StepTime {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.times)
}

// newTimer creates timing events around every launch and library call
// of the steps in force.
func (pr *Program) newTimer() (*timer, error) {
	t := &timer{start: map[plan.StepRef]Event{}, end: map[plan.StepRef]Event{}}
	for _, ref := range pr.steps.order {
		dev := pr.devs[ref.Device]
		if !pr.timedStep(ref) {
			continue
		}
		var err error
		if t.start[ref], err = dev.NewEvent(true); err != nil {
			return nil, err
		}
		if t.end[ref], err = dev.NewEvent(true); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// timedStep reports whether a timer times step ref: a launch its
// device runs, or a library call, of the variants in force.
func (pr *Program) timedStep(ref plan.StepRef) bool {
	o := pr.steps.ops[ref.Device][ref.Step]
	runs := o.lib != nil || o.launch != nil && pr.devs[ref.Device].Runs(&pr.Plan.Kernels[o.launch.k])
	return runs && pr.steps.steps[ref.Device][ref.Step].Place.Runs(pr.inForce)
}

func (pr *Program) kernelTiming(ref plan.StepRef, s Stats) KernelTiming {
	o := pr.steps.ops[ref.Device][ref.Step]
	var kt KernelTiming
	if o.lib != nil {
		kt = pr.libraryTiming(ref, o.lib, s)
	} else {
		k := &pr.Plan.Kernels[o.launch.k]
		kt = KernelTiming{Device: ref.Device, Step: ref.Step, Label: k.Label, Kernel: k.Name, Kind: k.Kind,
			Grid: k.Grid, Block: k.Block, FLOPs: k.FLOPs, Bytes: k.Bytes, Time: s}
	}
	if s.Median > 0 {
		kt.GFLOPS = float64(kt.FLOPs) / s.Median / 1e9
		kt.GBps = float64(kt.Bytes) / s.Median / 1e9
	}
	return kt
}

// CopyBandwidth measures dev's device-to-device copy bandwidth: the best
// of runs copies of n bytes, counting the bytes read and written (as a
// kernel's bytes count its arguments), in GB/s.
func CopyBandwidth(dev Device, n int64, runs int) (float64, error) {
	src, err := dev.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer dev.Free(src)
	dst, err := dev.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer dev.Free(dst)
	start, err := dev.NewEvent(true)
	if err != nil {
		return 0, err
	}
	end, err := dev.NewEvent(true)
	if err != nil {
		return 0, err
	}
	best := 0.0
	for i := range runs + 1 { // the first is a warm-up
		ms, err := timeCopy(dev, dst, src, n, start, end)
		if err != nil {
			return 0, err
		}
		if i > 0 && ms > 0 {
			best = max(best, 2*float64(n)/ms/1e6)
		}
	}
	return best, nil
}

// timeCopy copies n bytes from src to dst between two events.
func timeCopy(dev Device, dst, src Ptr, n int64, start, end Event) (float64, error) {
	if err := dev.Record(start); err != nil {
		return 0, err
	}
	if err := dev.Copy(dst, dev, src, Whole(n)); err != nil {
		return 0, err
	}
	if err := dev.Record(end); err != nil {
		return 0, err
	}
	if err := dev.Sync(); err != nil {
		return 0, err
	}
	return dev.Elapsed(start, end)
}
