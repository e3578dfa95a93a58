package hostlib

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CBLAS's enumerations.
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

func cblasTranspose(t bool) int32 {
	if t {
		return cblasTrans
	}
	return cblasNoTrans
}

// loadOpenBLAS binds OpenBLAS's cblas_sgemm, its thread count and its
// configuration string.
func loadOpenBLAS(h uintptr, l *Library) error {
	var (
		sgemm      func(order, ta, tb, m, n, k int32, alpha float32, a unsafe.Pointer, lda int32, b unsafe.Pointer, ldb int32, beta float32, c unsafe.Pointer, ldc int32)
		setThreads func(n int32)
		config     func() string
	)
	for sym, fn := range map[string]any{"cblas_sgemm": &sgemm, "openblas_set_num_threads": &setThreads, "openblas_get_config": &config} {
		if err := register(h, fn, sym); err != nil {
			return err
		}
	}
	l.Version = config()
	l.threads = func(n int) { setThreads(int32(n)) }
	l.sgemm = func(ta, tb bool, m, n, k int64, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, c unsafe.Pointer, ldc int64) {
		sgemm(cblasRowMajor, cblasTranspose(ta), cblasTranspose(tb), int32(m), int32(n), int32(k), 1, a, int32(lda), b, int32(ldb), 0, c, int32(ldc))
	}
	return nil
}

// dnnlVersion is oneDNN's dnnl_version_t, up to the fields read.
type dnnlVersion struct {
	Major, Minor, Patch int32
}

// loadOneDNN binds oneDNN's dnnl_sgemm (row-major) and the OpenMP
// runtime's thread count, which its CPU engine follows.
func loadOneDNN(h uintptr, l *Library) error {
	var (
		sgemm   func(ta, tb byte, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, beta float32, c unsafe.Pointer, ldc int64) int32
		version func() *dnnlVersion
	)
	for sym, fn := range map[string]any{"dnnl_sgemm": &sgemm, "dnnl_version": &version} {
		if err := register(h, fn, sym); err != nil {
			return err
		}
	}
	keepFreedMemory() // faster calls where it works; slower ones where not
	omp, err := purego.Dlopen("libgomp.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return fmt.Errorf("its OpenMP runtime libgomp.so.1: %w", err)
	}
	var setThreads func(n int32)
	if err := register(omp, &setThreads, "omp_set_num_threads"); err != nil {
		return err
	}
	v := version()
	l.Version = fmt.Sprintf("oneDNN %d.%d.%d", v.Major, v.Minor, v.Patch)
	// OpenMP's thread count is the calling thread's: it is set on the
	// thread that calls oneDNN, just before, with the goroutine held on
	// that thread between the two calls.
	var threads atomic.Int32
	l.threads = func(n int) { threads.Store(int32(n)) }
	inThreads := func(f func()) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		setThreads(threads.Load())
		f()
	}
	trans := func(t bool) byte {
		if t {
			return 'T'
		}
		return 'N'
	}
	l.sgemm = func(ta, tb bool, m, n, k int64, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, c unsafe.Pointer, ldc int64) {
		// The call is validated: dnnl_sgemm's only failure would be a
		// bad argument.
		var st int32
		inThreads(func() { st = sgemm(trans(ta), trans(tb), m, n, k, 1, a, lda, b, ldb, 0, c, ldc) })
		if st != 0 {
			panic(fmt.Sprintf("dnnl_sgemm: status %d", st))
		}
	}
	l.dnnl, err = bindDNNL(h, inThreads)
	return err
}

// glibc's mallopt parameters.
const (
	mTrimThreshold = -1
	mMmapThreshold = -3
)

// keepFreedMemory makes the C heap keep up to 256 MiB of freed memory
// and serve blocks below 32 MiB (glibc's largest mmap threshold) from
// it. oneDNN frees and allocates a large block at each convolution; in
// this process glibc's malloc returned it to the system and took it
// back each time (four brk calls a call under strace, 250,000 page
// faults a second), and a 64-channel 3 × 3 convolution at 56 × 56 took
// 1.8 ms where a C program took 0.7 (docs/placement.md). A C library
// without glibc's mallopt keeps its own behaviour.
func keepFreedMemory() {
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return
	}
	var mallopt func(param, value int32) int32
	if register(libc, &mallopt, "mallopt") != nil {
		return
	}
	mallopt(mTrimThreshold, 256<<20)
	mallopt(mMmapThreshold, 32<<20)
}
