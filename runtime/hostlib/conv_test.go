package hostlib

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// TestConv: oneDNN's convolutions, over random extents, groups
// (depthwise among them), strides, dilations, pads and offsets in one
// to three spatial dimensions, equal a float64 loop within f32's error
// bound for their sums; the buffers' other elements stay as they were.
// Each call runs twice, on two OS threads, as goroutines move between
// threads: a primitive runs on a thread other than the one that made
// it (oneDNN's per-thread scratchpad crashed there).
func TestConv(t *testing.T) {
	lib, err := Open("onednn")
	if err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 80 {
		c := randomConv(r, trial)
		if err := c.Check(); err != nil {
			t.Fatalf("trial %d: the test made a bad call %+v: %v", trial, c, err)
		}
		checkConv(t, lib, r, c, trial)
	}
}

// randomConv is a random valid convolution; every fourth is depthwise.
func randomConv(r *rand.Rand, trial int) *plan.ConvCall {
	s := 1 + r.IntN(3)
	group := 1 + r.Int64N(3)
	c := &plan.ConvCall{Backend: "onednn", N: 1 + r.Int64N(2), Group: group}
	c.C, c.O = group*(1+r.Int64N(5)), group*(1+r.Int64N(5))
	if trial%4 == 0 {
		c.Group = 8 + r.Int64N(9)
		c.C, c.O = c.Group, c.Group*(1+r.Int64N(2))
	}
	for range s {
		k, stride, dil := 1+r.Int64N(5), 1+r.Int64N(3), 1+r.Int64N(2)
		pb, pe := r.Int64N(k), r.Int64N(k)
		in := (k-1)*dil + 1 + r.Int64N(12-int64(4*s)+4) - min(pb+pe, (k-1)*dil)
		c.In, c.Kernel, c.Strides, c.Dilations = append(c.In, in), append(c.Kernel, k), append(c.Strides, stride), append(c.Dilations, dil)
		c.PadsBegin, c.PadsEnd = append(c.PadsBegin, pb), append(c.PadsEnd, pe)
		c.Out = append(c.Out, plan.ConvOutExtent(in, k, stride, dil, pb, pe))
	}
	c.X.Offset, c.W.Offset, c.Y.Offset = r.Int64N(4), r.Int64N(4), r.Int64N(4)
	return c
}

func checkConv(t *testing.T, lib *Library, r *rand.Rand, c *plan.ConvCall, trial int) {
	xs, ws, ys := c.Shapes()
	var bufs [3][]float32
	for i, at := range []plan.Dense{c.X, c.W, c.Y} {
		n, _ := plan.Cells([][]int64{xs, ws, ys}[i])
		bufs[i] = make([]float32, at.Offset+n+int64(r.IntN(3)))
		for j := range bufs[i] {
			bufs[i][j] = float32(r.NormFloat64())
		}
	}
	guard := append([]float32(nil), bufs[2]...)
	conv := func() error {
		return lib.Conv(c, unsafe.Pointer(&bufs[0][0]), unsafe.Pointer(&bufs[1][0]), unsafe.Pointer(&bufs[2][0]), 0)
	}
	if err1, err2 := onTwoThreads(conv, conv); err1 != nil || err2 != nil {
		t.Fatalf("trial %d (%+v): %v, %v", trial, c, err1, err2)
	}
	want, bound := referenceConv(c, bufs[0][c.X.Offset:], bufs[1][c.W.Offset:])
	for i, v := range bufs[2] {
		j := int64(i) - c.Y.Offset
		if j < 0 || j >= int64(len(want)) {
			if v != guard[i] {
				t.Fatalf("trial %d: element %d of y's buffer, outside the result, changed", trial, i)
			}
			continue
		}
		if math.Abs(float64(v)-want[j]) > bound[j] {
			t.Fatalf("trial %d (%+v): y[%d] = %g, want %g (bound %g)", trial, c, j, v, want[j], bound[j])
		}
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

// referenceConv is the call's result by its definition (plan.ConvCall)
// in float64, and each element's error bound in f32.
func referenceConv(c *plan.ConvCall, x, w []float32) (out, bound []float64) {
	_, ws, ys := c.Shapes()
	cg, og := c.C/c.Group, c.O/c.Group
	terms := cg
	for _, k := range c.Kernel {
		terms *= k
	}
	at := func(shape, idx []int64) int64 {
		off := int64(0)
		for d, i := range idx {
			off = off*shape[d] + i
		}
		return off
	}
	xs, _, _ := c.Shapes()
	forEach(ys, func(yi []int64) {
		n, o, pos := yi[0], yi[1], yi[2:]
		sum, abs := 0.0, 0.0
		forEach(ws[1:], func(wi []int64) {
			ch, k := wi[0], wi[1:]
			xi := []int64{n, (o/og)*cg + ch}
			for d := range pos {
				p := pos[d]*c.Strides[d] + k[d]*c.Dilations[d] - c.PadsBegin[d]
				if p < 0 || p >= c.In[d] {
					return
				}
				xi = append(xi, p)
			}
			term := float64(x[at(xs, xi)]) * float64(w[at(ws, append([]int64{o}, wi...))])
			sum, abs = sum+term, abs+math.Abs(term)
		})
		out = append(out, sum)
		bound = append(bound, 2*float64(terms+1)*0x1p-24*abs+1e-30)
	})
	return out, bound
}

// forEach calls f with every index of shape, row-major
// (tensor.ForEachIndex in int64).
func forEach(shape []int64, f func(idx []int64)) {
	dims := make([]int, len(shape))
	for d, n := range shape {
		dims[d] = int(n)
	}
	idx := make([]int64, len(shape))
	tensor.ForEachIndex(dims, func(_ int, at []int) {
		for d, v := range at {
			idx[d] = int64(v)
		}
		f(idx)
	})
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
		return len(lib.dnnl.convs)
	}
	before := held()
	c := randomConv(rand.New(rand.NewPCG(5, 6)), 0) // depthwise: reorders, own memories
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
	checkConv(t, lib, rand.New(rand.NewPCG(7, 8)), c, 0)
	second()
	if held() != before {
		t.Fatalf("%d primitives after the last release, want %d", held(), before)
	}
	checkConv(t, lib, rand.New(rand.NewPCG(7, 8)), c, 0) // held by no one: made and freed
	if held() != before {
		t.Fatalf("%d primitives after an unheld call, want %d", held(), before)
	}
}
