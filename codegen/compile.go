package codegen

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"tofuc/codegen/emit"
	"tofuc/codegen/simt"
	hosttarget "tofuc/codegen/target/host"
	"tofuc/codegen/toolchain"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// Emit chooses the artefacts Compile writes besides plan.json.
type Emit struct {
	LLVM bool // kernels/*.ll, the GPU-flavour modules as LLVM IR
	PTX  bool // kernels/*.ptx
	Host bool // host.so: the host-flavour kernels (the cpu runtime)
	SIMT bool // simt.so: the GPU flavour under the emulator (the simt runtime)
}

// EmitAll writes every artefact.
var EmitAll = Emit{LLVM: true, PTX: true, Host: true, SIMT: true}

// Options tune Compile.
type Options struct {
	Emit Emit
	// Jobs is how many llc processes run at once (0: GOMAXPROCS).
	Jobs int
	// Tools are the external tools (nil: toolchain.Find()).
	Tools *toolchain.Tools
	// Progress, when not nil, is called as each module is compiled.
	Progress func(done, total int)
	// FailedDir is where a module that fails to compile is kept, as
	// kernels/mN.failed.ll, for the person reading the error ("": the
	// output folder).
	FailedDir string
}

// Stats describe a compilation.
type Stats struct {
	Kernels     int           // launches the host runs in the plan
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
	b := newBuilder(g.Name, 1)
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
	if err := os.MkdirAll(filepath.Join(dir, "kernels"), 0o755); err != nil {
		return nil, err
	}
	modules := b.group(opts.Jobs)
	if err := b.compileModules(dir, modules, opts); err != nil {
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
			if s.Op != plan.Launch {
				continue
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

// moduleArtefacts are the compiled forms of one module.
type moduleArtefacts struct {
	gpu, ptx  string
	host, sim []byte
}

// compileModules emits every module in both flavours, runs llc on them in
// parallel and links the shared objects.
func (b *builder) compileModules(dir string, modules [][]int, opts Options) error {
	arts := make([]moduleArtefacts, len(modules))
	errs := make([]error, len(modules))
	sem := make(chan struct{}, opts.Jobs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, m := range modules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			arts[i], errs[i] = b.compileModule(m, opts)
			if opts.Progress != nil {
				mu.Lock()
				done++
				opts.Progress(done, len(modules))
				mu.Unlock()
			}
			if errs[i] != nil && arts[i].gpu != "" {
				// Keep the module that failed for the person reading the error.
				path := filepath.Join(cmp.Or(opts.FailedDir, dir), "kernels", fmt.Sprintf("m%d.failed.ll", i))
				if os.MkdirAll(filepath.Dir(path), 0o755) == nil && os.WriteFile(path, []byte(arts[i].gpu), 0o644) == nil {
					errs[i] = fmt.Errorf("%w\n(the module is in %s)", errs[i], path)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var hostObjs, simObjs [][]byte
	b.p.Modules = map[string]plan.Module{}
	var gpu plan.Module
	for i, a := range arts {
		base := filepath.Join("kernels", fmt.Sprintf("m%d", i))
		if opts.Emit.LLVM {
			if err := os.WriteFile(filepath.Join(dir, base+".ll"), []byte(a.gpu), 0o644); err != nil {
				return err
			}
			gpu.IR = append(gpu.IR, base+".ll")
		}
		if opts.Emit.PTX {
			if err := os.WriteFile(filepath.Join(dir, base+".ptx"), []byte(a.ptx), 0o644); err != nil {
				return err
			}
			gpu.Files = append(gpu.Files, base+".ptx")
		}
		hostObjs = append(hostObjs, a.host)
		simObjs = append(simObjs, a.sim)
	}
	if len(gpu.Files)+len(gpu.IR) > 0 {
		b.p.Modules["nvptx"] = gpu
	}
	if len(modules) == 0 {
		return nil // no kernel: nothing to link (a plan of views and copies)
	}
	ctx := context.Background()
	if opts.Emit.Host {
		name, err := b.link(ctx, dir, "host", hostObjs, []string{hosttarget.Source}, opts.Tools)
		if err != nil {
			return err
		}
		b.p.Modules["host"] = plan.Module{Files: []string{name}}
	}
	if opts.Emit.SIMT {
		name, err := b.link(ctx, dir, "simt", simObjs, []string{simt.Source}, opts.Tools)
		if err != nil {
			return err
		}
		b.p.Modules["simt"] = plan.Module{Files: []string{name}}
	}
	return nil
}

// link links objects into DIR/KIND-HASH.so; the hash in the name keeps
// libraries of different contents apart when loaded into one process.
func (b *builder) link(ctx context.Context, dir, kind string, objs [][]byte, csrc []string, tools *toolchain.Tools) (string, error) {
	so, err := tools.Link(ctx, objs, csrc)
	if err != nil {
		return "", fmt.Errorf("linking the %s kernels: %w", kind, err)
	}
	h := sha256.Sum256(so)
	name := kind + "-" + hex.EncodeToString(h[:6]) + ".so"
	if err := os.WriteFile(filepath.Join(dir, name), so, 0o755); err != nil {
		return "", err
	}
	return name, nil
}

// compileModule emits the kernels ids as one module of each flavour and
// compiles them.
func (b *builder) compileModule(ids []int, opts Options) (moduleArtefacts, error) {
	var a moduleArtefacts
	gpu, host := emit.NewModule(emit.GPU), emit.NewModule(emit.Host)
	var sigs []simt.Kernel
	for _, id := range ids {
		k, name := b.units[id], b.p.Kernels[id].Name
		if err := gpu.Add(name, k); err != nil {
			return a, err
		}
		if err := host.Add(name, k); err != nil {
			return a, err
		}
		sigs = append(sigs, simt.Kernel{Name: name, Elems: emit.ArgElems(k)})
	}
	a.gpu = gpu.String()
	ctx := context.Background()
	var err error
	if opts.Emit.PTX {
		ptx, err := opts.Tools.Compile(ctx, []byte(a.gpu), toolchain.PTX)
		if err != nil {
			return a, err
		}
		a.ptx = string(ptx)
		if strings.Contains(a.ptx, ".extern .func") {
			return a, fmt.Errorf("internal error: PTX module calls an external function")
		}
	}
	if opts.Emit.Host {
		if a.host, err = opts.Tools.Compile(ctx, []byte(host.String()), toolchain.Host); err != nil {
			return a, err
		}
	}
	if opts.Emit.SIMT {
		text, err := simt.Retarget(a.gpu, sigs)
		if err != nil {
			return a, err
		}
		if a.sim, err = opts.Tools.Compile(ctx, []byte(text), toolchain.Host); err != nil {
			return a, err
		}
	}
	return a, nil
}
