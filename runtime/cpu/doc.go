// Package cpu runs a plan's host-flavour kernels natively: the host
// shared object that code generation links (the target "host") is
// loaded, and each launch calls its kernel on ranges of its host range,
// split over a pool of threads. Its Kind opens host devices
// (runtime/host) with this engine: the cpu backend. Nothing falls back to
// the interpreter: a plan is what runs.
package cpu
