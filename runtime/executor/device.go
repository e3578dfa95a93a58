package executor

import "tofuc/runtime/plan"

// Ptr is an address in a device's memory.
type Ptr uint64

// Event marks a point in a device's stream (a CUDA event).
type Event uintptr

// Device is one logical device of a plan: its memory and its stream.
// Several logical devices may share one physical device, each with its
// own allocations and stream. Methods that enqueue work return before it
// runs; Sync waits for it. A Device is opened for one plan (its kernels
// are loaded then) and used by one goroutine at a time.
type Device interface {
	// Runs reports whether the device runs kernel k's launches: a GPU
	// runs no host-only kernel, the host no GPU-only one
	// (plan.Kernel.OnHost, OnGPU).
	Runs(k *plan.Kernel) bool
	// Alloc returns n bytes of device memory (n may be 0).
	Alloc(n int64) (Ptr, error)
	// Free releases memory Alloc returned.
	Free(p Ptr) error
	// Upload copies rows of host memory src to device memory at dst;
	// Download the other way. Both are synchronous and are called only
	// while the device is idle (after Sync).
	Upload(dst Ptr, src []byte, r Rows) error
	Download(dst []byte, src Ptr, r Rows) error
	// Copy enqueues a copy of rows from memory of device from (this
	// device or another of the same plan) to this device's memory.
	Copy(dst Ptr, from Device, src Ptr, r Rows) error
	// Zero enqueues setting n bytes at p to zero.
	Zero(p Ptr, n int64) error
	// Launch enqueues plan kernel k (its index in the plan) with the
	// argument vector a.
	Launch(k int, a *Args) error
	// NewEvent creates an event; timing events can be measured with
	// Elapsed, the others only ordered.
	NewEvent(timing bool) (Event, error)
	// Record enqueues e: it happens when the work enqueued before it is
	// done.
	Record(e Event) error
	// Wait makes the work enqueued after it wait for the last Record of
	// e (on any device of the plan) enqueued before this call.
	Wait(e Event) error
	// Elapsed is the time in milliseconds between two recorded timing
	// events of this device, after Sync.
	Elapsed(start, end Event) (float64, error)
	// Sync waits until the device's enqueued work is done and reports
	// its first failure.
	Sync() error
	// Name describes the device (the GPU behind it).
	Name() string
	// Close releases the device's stream and events (not the memory
	// Alloc returned: Free it first).
	Close() error
}

// HostDevice is a device whose memory the host reads and writes
// directly, so that it can run a plan's opaque steps (functions called on
// the host, runtime/opaque): the host and emulated devices, not a GPU.
type HostDevice interface {
	Device
	// Bytes is the device memory [p, p+n), which lies in one allocation.
	Bytes(p Ptr, n int64) ([]byte, error)
	// Do enqueues f, run on the host in the stream's order; its error is
	// the device's failure, reported by Sync.
	Do(f func() error) error
}
