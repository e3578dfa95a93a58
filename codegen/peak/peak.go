package peak

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"tofuc/codegen/blocking"
	"tofuc/codegen/toolchain"
	"tofuc/runtime/native"
)

// chains is the number of independent accumulators: enough to cover the
// latency of the FMA units of any current x86 or Arm core (two units of
// four or five cycles need ten).
const chains = 12

// Result is a measured peak.
type Result struct {
	FLOPS   float64 // float32 operations per second (an FMA is two)
	Threads int
	Lanes   int64 // f32 lanes per vector
}

func (r Result) String() string {
	return fmt.Sprintf("%.1f GFLOP/s f32 on %d threads (%d-lane fused multiply-adds, %d chains)", r.FLOPS/1e9, r.Threads, r.Lanes, chains)
}

// module is the probe: peak(n) runs n iterations of one FMA on each of
// the chains and returns a value read from all of them, so that none is
// dead code.
func module(lanes int64) string {
	vec := fmt.Sprintf("<%d x float>", lanes)
	splat := func(v string) string {
		return "<" + strings.TrimSuffix(strings.Repeat("float "+v+", ", int(lanes)), ", ") + ">"
	}
	fma := fmt.Sprintf("@llvm.fma.v%df32", lanes)
	var b strings.Builder
	fmt.Fprintf(&b, "declare %s %s(%s, %s, %s)\n\n", vec, fma, vec, vec, vec)
	fmt.Fprintf(&b, "define float @peak(i64 %%n) {\nentry:\n  br label %%loop\nloop:\n  %%i = phi i64 [0, %%entry], [%%i1, %%loop]\n")
	for c := range chains {
		fmt.Fprintf(&b, "  %%a%d = phi %s [%s, %%entry], [%%b%d, %%loop]\n", c, vec, splat(fmt.Sprintf("%d.0", c)), c)
	}
	// x·0.5 + 0.5 converges to 1: no overflow, no denormals.
	for c := range chains {
		fmt.Fprintf(&b, "  %%b%d = call %s %s(%s %%a%d, %s %s, %s %s)\n", c, vec, fma, vec, c, vec, splat("0.5"), vec, splat("0.5"))
	}
	fmt.Fprintf(&b, "  %%i1 = add i64 %%i, 1\n  %%more = icmp ult i64 %%i1, %%n\n  br i1 %%more, label %%loop, label %%exit\nexit:\n")
	prev := "%b0"
	for c := 1; c < chains; c++ {
		fmt.Fprintf(&b, "  %%s%d = fadd %s %s, %%b%d\n", c, vec, prev, c)
		prev = fmt.Sprintf("%%s%d", c)
	}
	fmt.Fprintf(&b, "  %%r = extractelement %s %s, i32 0\n  ret float %%r\n}\n", vec, prev)
	return b.String()
}

// Measure runs the probe on threads threads at once (every core when
// threads < 1), each call lasting about d, and returns the best of five
// rounds.
func Measure(threads int, d time.Duration) (Result, error) {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	lanes := blocking.HostLanes()
	fn, err := load(lanes)
	if err != nil {
		return Result{}, err
	}
	// Calibrate: one thread, growing until a call takes d/4.
	n := int64(1 << 16)
	for {
		t0 := time.Now()
		native.Call(fn, uintptr(n))
		if time.Since(t0) > d/4 {
			n = int64(float64(n) * float64(d) / float64(time.Since(t0)))
			break
		}
		n *= 4
	}
	best := 0.0
	for range 5 {
		var wg sync.WaitGroup
		t0 := time.Now()
		for range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				native.Call(fn, uintptr(n))
			}()
		}
		wg.Wait()
		flops := float64(threads) * float64(n) * chains * float64(lanes) * 2
		best = max(best, flops/time.Since(t0).Seconds())
	}
	return Result{FLOPS: best, Threads: threads, Lanes: lanes}, nil
}

// load compiles the probe for the host and returns its function.
func load(lanes int64) (uintptr, error) {
	tools, err := toolchain.Find()
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	obj, err := tools.Compile(ctx, []byte(module(lanes)), toolchain.Host)
	if err != nil {
		return 0, err
	}
	so, err := tools.Link(ctx, [][]byte{obj}, nil)
	if err != nil {
		return 0, err
	}
	lib, err := native.OpenBytes("the peak probe", so)
	if err != nil {
		return 0, err
	}
	return lib.Symbol("peak")
}
