package codegen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"tofuc/codegen/emit"
	"tofuc/codegen/target"
	"tofuc/codegen/toolchain"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// Options tune Compile.
type Options struct {
	// Emit names the artefacts to write besides plan.json
	// (target.Artefacts: llvm, ptx, host, simt): the targets that make
	// them are built. nil: every target's.
	Emit []string
	// Jobs is how many llc processes run at once (0: GOMAXPROCS).
	Jobs int
	// Tools are the external tools (nil: toolchain.Find()).
	Tools *toolchain.Tools
	// Progress, when not nil, is called as each module is compiled.
	Progress func(done, total int)
	// Precision is the arithmetic of the kernels (lang/precision).
	Precision precision.Mode
	// Backends are the vendor libraries (runtime/hostlib's names, and
	// plan.GPUBackends) offered each contraction that one can run,
	// beside the generated kernel, as the variants of a placement group
	// (docs/placement.md); the plan chooses the generated one until a
	// placement measures them.
	Backends []string
	// FailedDir is where a module that fails to compile is kept, as
	// kernels/mN.failed.ll, for the person reading the error ("": the
	// output folder).
	FailedDir string
}

// Stats describe a compilation.
type Stats struct {
	Kernels     int           // launches the host runs in the plan (its generated kernels, where placement groups offer libraries)
	GPULaunches int           // launches a GPU runs (a chained launch is two)
	Distinct    int           // distinct kernels compiled
	Modules     int           // modules they were grouped into
	Seconds     time.Duration // wall time of the whole compilation
}

// Compiled is the result of a compilation.
type Compiled struct {
	Plan  *plan.Plan
	Dir   string
	Stats Stats
}

// Compile lowers g on one device into dir (created if missing): it writes
// plan.json and the artefacts opts.Emit asks for.
func Compile(g *ir.Graph, dir string, opts Options) (*Compiled, error) {
	start := time.Now()
	b := newBuilder(g.Name, 1, opts.Precision)
	b.backends = opts.Backends
	if err := b.singleDevice(g); err != nil {
		return nil, err
	}
	return b.finish(dir, opts, start)
}

// finish compiles the kernels, places the buffers and writes the plan.
func (b *builder) finish(dir string, opts Options, start time.Time) (*Compiled, error) {
	if opts.Tools == nil {
		t, err := toolchain.Find()
		if err != nil {
			return nil, err
		}
		opts.Tools = t
	}
	if opts.Jobs <= 0 {
		opts.Jobs = runtime.GOMAXPROCS(0)
	}
	want := target.Set{}
	if opts.Emit == nil {
		opts.Emit = target.Artefacts()
	}
	for _, a := range opts.Emit {
		want[a] = true
	}
	targets, err := target.Chosen(want)
	if err != nil {
		return nil, err
	}
	modules := b.group(opts.Jobs)
	if err := b.compileModules(dir, modules, targets, want, opts); err != nil {
		return nil, err
	}
	b.allocate()
	if err := b.p.Validate(); err != nil {
		return nil, fmt.Errorf("internal error: the plan is inconsistent: %w", err)
	}
	if err := b.p.Write(filepath.Join(dir, "plan.json")); err != nil {
		return nil, err
	}
	st := Stats{Distinct: len(b.units), Modules: len(modules), Seconds: time.Since(start)}
	for _, steps := range b.p.Steps {
		for _, s := range steps {
			if s.Op != plan.Launch || s.Place != nil && !slices.Contains(s.Place.Variants, plan.Generated) {
				continue // counted as the generated kernels run
			}
			k := &b.p.Kernels[s.Kernel]
			if k.OnHost() {
				st.Kernels++
			}
			if k.OnGPU() {
				st.GPULaunches++
			}
		}
	}
	return &Compiled{Plan: b.p, Dir: dir, Stats: st}, nil
}

// maxPerModule bounds the kernels of one module, so that llc's work
// spreads over the jobs.
const maxPerModule = 16

// group splits the distinct kernels into modules: at least one per job
// when there are enough, at most maxPerModule kernels each.
func (b *builder) group(jobs int) [][]int {
	n := len(b.units)
	if n == 0 {
		return nil
	}
	per := max(1, min(maxPerModule, (n+jobs-1)/jobs))
	var out [][]int
	for i := 0; i < n; i += per {
		var m []int
		for j := i; j < min(n, i+per); j++ {
			b.p.Kernels[j].Module = len(out)
			m = append(m, j)
		}
		out = append(out, m)
	}
	return out
}

// compileModules lowers every module for the targets (once per distinct
// lowering), compiles each module for each target as a job of its own,
// the largest first, opts.Jobs at a time (a module's three compiles one
// after the other left a core idle at the end), and has the targets
// write their files at the same time.
func (b *builder) compileModules(dir string, modules [][]int, targets []target.Target, want target.Set, opts Options) error {
	lowered := make([]loweredModule, len(modules))
	errs := make([]error, len(modules))
	parallelJobs(len(modules), opts.Jobs, func(i int) { lowered[i], errs[i] = b.lower(modules[i], targets) })
	if err := errors.Join(errs...); err != nil {
		return err
	}
	objs, failures := compileJobs(lowered, targets, want, opts)
	for i, byTarget := range failures {
		// The first target's failure in target order is kept, whichever
		// job ended first.
		if t := slices.IndexFunc(byTarget, func(err error) bool { return err != nil }); t >= 0 {
			errs[i] = keepFailed(byTarget[t], lowered[i].texts[targets[t].Machine()], i, dir, opts)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return b.finishTargets(dir, objs, targets, want, opts)
}

// compileJobs compiles each lowered module for each target, the largest
// texts first, opts.Jobs at a time, and returns the objects and the
// failures by module and target.
func compileJobs(lowered []loweredModule, targets []target.Target, want target.Set, opts Options) ([][]target.Object, [][]error) {
	type job struct{ module, target int }
	var jobs []job
	for i := range lowered {
		for t := range targets {
			jobs = append(jobs, job{i, t})
		}
	}
	size := func(j job) int { return len(lowered[j.module].texts[targets[j.target].Machine()]) }
	slices.SortStableFunc(jobs, func(a, c job) int { return cmp.Compare(size(c), size(a)) })
	objs := make([][]target.Object, len(lowered))
	failures := make([][]error, len(lowered)) // by module and target
	for i := range objs {
		objs[i] = make([]target.Object, len(targets))
		failures[i] = make([]error, len(targets))
	}
	left := make([]int, len(lowered)) // targets still compiling each module
	for i := range left {
		left[i] = len(targets)
	}
	var mu sync.Mutex
	done := 0
	parallelJobs(len(jobs), opts.Jobs, func(k int) {
		j := jobs[k]
		text := lowered[j.module].texts[targets[j.target].Machine()]
		o, err := targets[j.target].Compile(context.Background(), opts.Tools, text, lowered[j.module].kernels, want)
		mu.Lock()
		defer mu.Unlock()
		objs[j.module][j.target], failures[j.module][j.target] = o, err
		if left[j.module]--; left[j.module] == 0 && opts.Progress != nil {
			done++
			opts.Progress(done, len(lowered))
		}
	})
	return objs, failures
}

// keepFailed keeps the text of module i, which failed to compile with
// err, for the person reading the error, and says where.
func keepFailed(err error, text string, i int, dir string, opts Options) error {
	path := filepath.Join(cmp.Or(opts.FailedDir, dir), target.ModuleFile(i, "failed.ll"))
	if os.MkdirAll(filepath.Dir(path), 0o755) == nil && os.WriteFile(path, []byte(text), 0o644) == nil {
		return fmt.Errorf("%w\n(the module is in %s)", err, path)
	}
	return err
}

// finishTargets has every target write its files for its compiled
// modules (objs[module][target]), all targets at once, and records them
// in the plan.
func (b *builder) finishTargets(dir string, objs [][]target.Object, targets []target.Target, want target.Set, opts Options) error {
	modules := make([]plan.Module, len(targets))
	ok := make([]bool, len(targets))
	errs := make([]error, len(targets))
	parallelJobs(len(targets), len(targets), func(t int) {
		per := make([]target.Object, len(objs))
		for i := range objs {
			per[i] = objs[i][t]
		}
		modules[t], ok[t], errs[t] = targets[t].Finish(context.Background(), opts.Tools, dir, per, want)
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b.p.Modules = map[string]plan.Module{}
	for t, tg := range targets {
		if ok[t] {
			b.p.Modules[tg.Name()] = modules[t]
		}
	}
	return nil
}

// parallelJobs runs f(0), ..., f(n-1), at most jobs at once.
func parallelJobs(n, jobs int, f func(k int)) {
	sem := make(chan struct{}, max(1, jobs))
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(k)
		}()
	}
	wg.Wait()
}

// loweredModule is a module's text in each lowering its targets compile
// (by machine; nil is the host flavour) and its kernels' signatures.
type loweredModule struct {
	texts   map[emit.Machine]string
	kernels []target.Kernel
}

// lower lowers the kernels ids as one module for each lowering the
// targets need.
func (b *builder) lower(ids []int, targets []target.Target) (loweredModule, error) {
	out := loweredModule{texts: map[emit.Machine]string{}}
	for _, tg := range targets {
		mc := tg.Machine()
		if _, ok := out.texts[mc]; ok {
			continue
		}
		m := newModule(mc, b.p.Precision)
		for _, id := range ids {
			k := &b.p.Kernels[id]
			if err := m.Add(k.Name, b.units[id]); err != nil {
				return out, err
			}
			// What the kernel is compiled for, which runtimes compare
			// the plan with (plan.Built).
			m.Data(plan.BuiltSymbol(k.Name), plan.EncodeBuilt(k.Built()))
		}
		out.texts[mc] = m.String()
	}
	for _, id := range ids {
		out.kernels = append(out.kernels, target.Kernel{Name: b.p.Kernels[id].Name, Elems: emit.ArgElems(b.units[id])})
	}
	return out, nil
}

// newModule starts a module in the lowering of machine mc (nil: the
// host flavour) computing in mode p.
func newModule(mc emit.Machine, p precision.Mode) *emit.Module {
	if mc == nil {
		return emit.NewHostModule(p)
	}
	return emit.NewGPUModule(mc, p)
}
