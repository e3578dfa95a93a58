package executor

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"tofuc/runtime/plan"
)

// Kind is a kind of device that runs plans: what `tofuc run --backend`
// names. A package that implements devices registers its kinds
// (runtime/cpu, runtime/simt, runtime/cuda); docs/architecture.md says
// how to add one.
type Kind struct {
	// Name is the kind's name ("cpu", "simt", "cuda").
	Name string
	// Module is the target whose compiled files its devices run (a key
	// of plan.Plan.Modules: "host", "simt", "nvptx").
	Module string
	// Summary describes the kind in a few words, for help texts.
	Summary string
	// Open opens a device for every logical device of plan p, compiled
	// into dir.
	Open func(p *plan.Plan, dir string, opts Options) ([]Device, error)
}

// Options tune the devices a Kind opens.
type Options struct {
	// Threads bounds the host threads of devices that run on the host
	// (0: GOMAXPROCS).
	Threads int
	// Strict makes host devices run their work only when synchronised,
	// last device first, to expose missing dependencies (tests;
	// runtime/host's Strict mode).
	Strict bool
	// OneRank opens the devices for a process that runs one of them, a
	// rank of several (OpenRank): host devices run its work inline.
	OneRank bool
	// OneAtATime makes host devices run each step as it is enqueued, in
	// the order of the plan's steps, one step of one device at a time:
	// each kernel is timed alone (tofuc run --runs).
	OneAtATime bool
}

var (
	kindsMu sync.Mutex
	kinds   []Kind
)

// Register adds a kind of device; a second kind of the same name
// replaces the first.
func Register(k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if i := slices.IndexFunc(kinds, func(o Kind) bool { return o.Name == k.Name }); i >= 0 {
		kinds[i] = k
		return
	}
	kinds = append(kinds, k)
}

// Unregister removes the kind called name (tests).
func Unregister(name string) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	kinds = slices.DeleteFunc(kinds, func(k Kind) bool { return k.Name == name })
}

// Kinds lists the registered kinds in the order of registration.
func Kinds() []Kind {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	return slices.Clone(kinds)
}

// KindNames lists the registered kinds' names.
func KindNames() []string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, k.Name)
	}
	return out
}

// Lookup returns the kind called name.
func Lookup(name string) (Kind, error) {
	for _, k := range Kinds() {
		if k.Name == name {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("unknown backend %q (expected %s)", name, strings.Join(KindNames(), ", "))
}

// Open loads plan p, compiled into dir, on devices of the kind called
// name.
func Open(p *plan.Plan, dir, name string, opts Options) (*Program, error) {
	k, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	devs, err := k.Open(p, dir, opts)
	if err != nil {
		return nil, err
	}
	return Load(p, devs)
}
