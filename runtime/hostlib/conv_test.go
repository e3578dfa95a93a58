package hostlib

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"tofuc/internal/convcase"
	"tofuc/runtime/plan"
)

// TestConv: oneDNN's convolutions, over random extents, groups
// (depthwise among them), strides, dilations, pads and offsets in one
// to three spatial dimensions, equal a float64 loop within f32's error
// bound for their sums; the buffers' other elements stay as they were.
// Each call runs twice, on two OS threads, as goroutines move between
// threads: a primitive runs on a thread other than the one that made
// it (oneDNN's per-thread scratchpad crashed there).
func TestConv(t *testing.T) {
	convTrials(t, rand.New(rand.NewPCG(3, 4)), 80, func(_ *rand.Rand, tc convcase.Case, _ int) convcase.Case { return tc })
}

// TestConvPostOps: the same with post-ops, a bias and activations
// (ReLU, ReLU6, clips of one and two bounds), equal to the float64
// loop's sums with them applied.
func TestConvPostOps(t *testing.T) {
	convTrials(t, rand.New(rand.NewPCG(5, 7)), 60, convcase.WithPost)
}

// convTrials checks oneDNN's convolutions of trials random calls, each
// made by convcase.Random and then edit.
func convTrials(t *testing.T, r *rand.Rand, trials int, edit func(r *rand.Rand, tc convcase.Case, trial int) convcase.Case) {
	lib, err := Open("onednn")
	if err != nil {
		t.Skip(err)
	}
	for trial := range trials {
		tc := edit(r, convcase.Random(r, "onednn", trial, false), trial)
		if err := tc.Call.Check(); err != nil {
			t.Fatalf("trial %d: the test made a bad call %+v: %v", trial, tc.Call, err)
		}
		checkConv(t, lib, tc, trial)
	}
}

func checkConv(t *testing.T, lib *Library, tc convcase.Case, trial int) {
	c := tc.Call
	out := slices.Clone(tc.Bufs[2])
	var bias unsafe.Pointer
	if tc.Bias != nil {
		bias = unsafe.Pointer(&tc.Bias[0])
	}
	conv := func() error {
		return lib.Conv(c, unsafe.Pointer(&tc.Bufs[0][0]), unsafe.Pointer(&tc.Bufs[1][0]), unsafe.Pointer(&out[0]), bias, 0)
	}
	if err1, err2 := onTwoThreads(conv, conv); err1 != nil || err2 != nil {
		t.Fatalf("trial %d (%+v): %v, %v", trial, c, err1, err2)
	}
	if err := tc.Check(out); err != nil {
		t.Fatalf("trial %d: %v", trial, err)
	}
}

// onTwoThreads runs first on one OS thread, then, with that thread
// still held, second on another.
func onTwoThreads(first, second func() error) (error, error) {
	var errs [2]error
	held, release, done := make(chan bool), make(chan bool), make(chan bool)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errs[0] = first()
		held <- true
		<-release
	}()
	<-held
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errs[1] = second()
		done <- true
	}()
	<-done
	release <- true
	return errs[0], errs[1]
}

// TestConvReleased: a convolution's primitive lives while a caller
// holds it and is freed with its last holder; a call that no caller
// holds frees its own (40 depthwise shapes held for the process took
// 295 MB).
func TestConvReleased(t *testing.T) {
	lib, err := Open("onednn")
	if err != nil {
		t.Skip(err)
	}
	held := func() int {
		lib.dnnl.mu.Lock()
		defer lib.dnnl.mu.Unlock()
		return len(lib.dnnl.prims)
	}
	before := held()
	tc := convcase.Random(rand.New(rand.NewPCG(5, 6)), "onednn", 0, false) // depthwise: reorders, own memories
	c := tc.Call
	first, err := lib.AcquireConv(c)
	if err != nil {
		t.Fatal(err)
	}
	second, err := lib.AcquireConv(c)
	if err != nil {
		t.Fatal(err)
	}
	if held() != before+1 {
		t.Fatalf("%d primitives after two holds of one call, want %d", held(), before+1)
	}
	first()
	first() // a second release of one hold does nothing
	if held() != before+1 {
		t.Fatalf("%d primitives with one holder left, want %d", held(), before+1)
	}
	checkConv(t, lib, tc, 0)
	second()
	if held() != before {
		t.Fatalf("%d primitives after the last release, want %d", held(), before)
	}
	checkConv(t, lib, tc, 0) // held by no one: made and freed
	if held() != before {
		t.Fatalf("%d primitives after an unheld call, want %d", held(), before)
	}
}

// TestConvPostOpsInfinite: a bound with an open side leaves an infinite
// sum infinite (it was clipped to the largest f32 once).
func TestConvPostOpsInfinite(t *testing.T) {
	lib, err := Open("onednn")
	if err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		act  plan.Activation
		w    float32
		want float32
	}{
		{plan.Activation{Kind: plan.ActMax, Value: 0.5}, 10, float32(math.Inf(1))},
		{plan.Activation{Kind: plan.ActMin, Value: -0.5}, -10, float32(math.Inf(-1))},
	} {
		c := &plan.ConvCall{Backend: "onednn", N: 1, C: 1, O: 1, Group: 1, In: []int64{4}, Kernel: []int64{1}, Out: []int64{4},
			Strides: []int64{1}, Dilations: []int64{1}, PadsBegin: []int64{0}, PadsEnd: []int64{0},
			Post: &plan.PostOps{Acts: []plan.Activation{tc.act}}}
		x, w, y := []float32{3e38, 3e38, 3e38, 3e38}, []float32{tc.w}, make([]float32, 4)
		if err := lib.Conv(c, unsafe.Pointer(&x[0]), unsafe.Pointer(&w[0]), unsafe.Pointer(&y[0]), nil, 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range y {
			if v != tc.want {
				t.Errorf("%+v: y[%d] = %g, want %g", tc.act, i, v, tc.want)
			}
		}
	}
}
