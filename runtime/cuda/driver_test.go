package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"tofuc/internal/fakecuda"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
)

// TestNoDriver: a missing library is one line, and so is the default
// driver's absence on a machine without one.
func TestNoDriver(t *testing.T) {
	_, err := LoadFrom("/nonexistent/libcuda.so.1")
	if err == nil || err.Error() != "no CUDA driver: /nonexistent/libcuda.so.1 not found" {
		t.Errorf("got %v", err)
	}
	if _, err := Load(); err != nil {
		if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "no CUDA driver") && !strings.Contains(err.Error(), "does not start") {
			t.Errorf("not one line about the driver: %q", err)
		}
		if Probe() != err.Error() {
			t.Errorf("Probe says %q, Load %q", Probe(), err)
		}
	}
}

// TestCopyDescriptorLayout: memcpy3D has CUDA_MEMCPY3D_PEER's layout on
// 64-bit systems (cuda.h: size_t, enum, pointers).
func TestCopyDescriptorLayout(t *testing.T) {
	var c memcpy3D
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"size", unsafe.Sizeof(c), 200},
		{"srcMemoryType", unsafe.Offsetof(c.srcType), 32},
		{"srcHost", unsafe.Offsetof(c.srcHost), 40},
		{"srcDevice", unsafe.Offsetof(c.srcDevice), 48},
		{"srcContext", unsafe.Offsetof(c.srcContext), 64},
		{"srcPitch", unsafe.Offsetof(c.srcPitch), 72},
		{"dstXInBytes", unsafe.Offsetof(c.dstX), 88},
		{"dstMemoryType", unsafe.Offsetof(c.dstType), 120},
		{"dstContext", unsafe.Offsetof(c.dstContext), 152},
		{"WidthInBytes", unsafe.Offsetof(c.width), 176},
		{"Depth", unsafe.Offsetof(c.depth), 192},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, want %d", f.name, f.got, f.want)
		}
	}
}

// fakeDriverLib is the fake driver, built once per process: the fake
// cuBLAS and cuDNN find the driver's functions by name among those
// loaded, the first copy's.
var fakeDriverLib = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		return "", err
	}
	return fakecuda.Build(dir)
})

// built skips the test where err says that there is no C compiler to
// build a fake library, and fails it on another error: a fake that does
// not compile must not pass for a machine without a compiler.
func built(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, exec.ErrNotFound) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// fake loads the fake driver (internal/fakecuda) with n GPUs.
func fake(t *testing.T, n string) *Driver {
	t.Helper()
	lib, err := fakeDriverLib()
	built(t, err)
	t.Setenv("FAKECUDA_DEVICES", n)
	d, err := LoadFrom(lib)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFakeDriverDescribes reads the version and the GPUs through the
// binding.
func TestFakeDriverDescribes(t *testing.T) {
	d := fake(t, "2")
	gpus, err := d.GPUs()
	if err != nil {
		t.Fatal(err)
	}
	if d.VersionString() != "13.0" || len(gpus) != 2 || gpus[1].String() != "Fake GPU 1 (sm_90, 1.0 GiB, 4 SMs)" {
		t.Errorf("driver %s, GPUs %v", d.VersionString(), gpus)
	}
}

// planWith is a plan of one kernel on n devices whose module is text,
// after the record of what the kernel was compiled for (as llc writes a
// global array of bytes).
func planWith(t *testing.T, devices int, text string) (*plan.Plan, string) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "kernels"), 0o755); err != nil {
		t.Fatal(err)
	}
	k := plan.Kernel{Name: "kfake", Grid: 1, Block: 32, Args: []plan.Arg{{DType: "f32", Shape: []int64{4}}}}
	rec := plan.EncodeBuilt(k.Built())
	bytes := make([]string, len(rec))
	for i, c := range rec {
		bytes[i] = fmt.Sprint(c)
	}
	text = fmt.Sprintf(".visible .global .align 1 .b8 %s[%d] = {%s};\n%s", plan.BuiltSymbol(k.Name), len(rec), strings.Join(bytes, ", "), text)
	if err := os.WriteFile(filepath.Join(dir, "kernels", "m0.ptx"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{Version: plan.Version, Devices: devices, Modules: map[string]plan.Module{Module: {Files: []plan.File{plan.FileOf("kernels/m0.ptx", []byte(text))}}},
		Kernels:    []plan.Kernel{k},
		ArenaBytes: make([]int64, devices), Init: make([][]plan.Step, devices), Steps: make([][]plan.Step, devices)}
	return p, dir
}

// TestJITErrorLog: PTX the driver cannot compile is an error that shows
// the JIT's log and names the module.
func TestJITErrorLog(t *testing.T) {
	d := fake(t, "1")
	p, dir := planWith(t, 1, "FAKECUDA_SYNTAX_ERROR")
	_, err := d.Open(p, dir)
	if err == nil || !strings.Contains(err.Error(), "kernels/m0.ptx on GPU 0: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218)") ||
		!strings.Contains(err.Error(), "Parsing error near 'FAKECUDA_SYNTAX_ERROR'") {
		t.Errorf("got %v", err)
	}
}

// openFake opens n logical devices of a plan without kernels on the fake
// driver's GPUs (gpus of them), or on the real driver's when gpus is
// "cuda".
func openFake(t *testing.T, gpus string, n int) []executor.Device {
	t.Helper()
	var d *Driver
	if gpus == "cuda" {
		var err error
		if d, err = Load(); err != nil {
			t.Skip(err)
		}
	} else {
		d = fake(t, gpus)
	}
	p, dir := planWith(t, n, "")
	p.Kernels, p.Modules = nil, nil
	devs, err := d.Open(p, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, v := range devs {
			if err := v.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return devs
}

// TestCopies moves a strided box from the host to one GPU, to a logical
// device on the other GPU (a 3-D peer copy, then with the pitch limited
// so that rows go one by one), to a logical device sharing the first
// GPU, and back: the bytes arrive where BoxRows puts them. On the real
// driver ("cuda"), the logical devices share the GPUs there are.
func TestCopies(t *testing.T) {
	for _, tc := range []struct{ gpus, pitch string }{{"2", ""}, {"2", "8"}, {"cuda", ""}} {
		t.Run(tc.gpus+"-max-pitch="+tc.pitch, func(t *testing.T) {
			if tc.pitch != "" {
				t.Setenv("FAKECUDA_MAX_PITCH", tc.pitch)
			}
			devs := openFake(t, tc.gpus, 3) // logical 0 and 2 share GPU 0
			from, box, to := []int64{3, 4, 5}, []plan.Dim{{Lo: 1, Hi: 3}, {Lo: 1, Hi: 3}, {Lo: 0, Hi: 4}}, []int64{2, 2, 4}
			src := make([]byte, 3*4*5*4)
			for i := range src {
				src[i] = byte(i)
			}
			rows := executor.BoxRows(4, from, box, to, []int64{0, 0, 0})
			n := int64(len(src))
			ptrs := make([]executor.Ptr, 3)
			for i, v := range devs {
				var err error
				if ptrs[i], err = v.Alloc(n); err != nil {
					t.Fatal(err)
				}
				defer v.Free(ptrs[i])
			}
			if err := devs[0].Upload(ptrs[0], src, executor.Whole(n)); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if err := devs[1].Copy(ptrs[1], devs[0], ptrs[0], r); err != nil {
					t.Fatal(err)
				}
			}
			if err := devs[2].Copy(ptrs[2], devs[1], ptrs[1], executor.Whole(2*2*4*4)); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 2*2*4*4)
			for _, v := range devs {
				if err := v.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if err := devs[2].Download(got, ptrs[2], executor.Whole(int64(len(got)))); err != nil {
				t.Fatal(err)
			}
			var want []byte
			for _, r := range rows {
				r.Each(func(so, _ int64) { want = append(want, src[so:so+r.Width]...) })
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got %v\nwant %v", got, want)
			}
		})
	}
}

// TestEvents: timing events measure, ordering events refuse to.
func TestEvents(t *testing.T) {
	for _, gpus := range []string{"1", "cuda"} {
		t.Run(gpus, func(t *testing.T) { testEvents(t, openFake(t, gpus, 1)[0]) })
	}
}

func testEvents(t *testing.T, v executor.Device) {
	a, err := v.NewEvent(true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.NewEvent(true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.NewEvent(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []executor.Event{a, b, c} {
		if err := v.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Wait(c); err != nil {
		t.Fatal(err)
	}
	if ms, err := v.Elapsed(a, b); err != nil || ms < 0 {
		t.Errorf("elapsed %v, %v", ms, err)
	}
	if _, err := v.Elapsed(a, c); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_HANDLE") {
		t.Errorf("elapsed to an ordering event: %v", err)
	}
}

// TestChecks runs the checks under $TOFUC_GPU_CHECKS (written by
// codegen's TestWriteGPUChecks, docs/gpu.md) on the GPUs: each plan's
// outputs equal the cpu runtime's within the check's tolerance.
func TestChecks(t *testing.T) {
	root := os.Getenv("TOFUC_GPU_CHECKS")
	if root == "" {
		t.Skip("$TOFUC_GPU_CHECKS names no folder of checks")
	}
	d, err := Load()
	if err != nil {
		t.Skip(err)
	}
	t.Log(Probe())
	dirs, err := executor.CheckDirs(root)
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no checks under %s (%v)", root, err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if err := executor.RunCheck(dir, d.Open); err != nil {
				t.Error(err)
			}
		})
	}
}
