// Package host is the host target: kernels lowered in the host flavour,
// compiled by llc for this machine's CPU and linked, with host.c, into
// one shared object that runtime/cpu loads.
package host

import _ "embed"

// Source is the C part of the host shared object (csrc/host.c: glibc keeps
// the kernels' per-call scratch memory between calls).
//
//go:embed csrc/host.c
var Source string
