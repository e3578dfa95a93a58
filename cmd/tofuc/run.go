package main

import (
	"fmt"
	"io"

	"tofuc/analysis/autodiff"
	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/cpu"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

type runFlags struct {
	backend, params, out string
	ins                  []string
	random               bool
	seed                 uint64
	threads              int
}

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("run", stderr)
	var f runFlags
	fs.StringVar(&f.backend, "backend", "cpu", "the runtime: cpu (host kernels) or simt (GPU kernels, emulated)")
	fs.StringArrayVar(&f.ins, "in", nil, "an input, NAME=PATH.npy (repeatable)")
	fs.BoolVar(&f.random, "random-inputs", false, "draw inputs not given with --in from the seed")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of random inputs")
	fs.StringVar(&f.params, "params", "", "parameters, one .npz (default: DIR/params.npz, written by compile)")
	fs.StringVar(&f.out, "out", "", "directory for the outputs (created if missing)")
	fs.IntVar(&f.threads, "threads", 0, "host threads (0: all cores)")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	switch {
	case fs.NArg() != 1:
		return usageError(stderr, "run", "expected one DIR (what tofuc compile -o wrote)")
	case f.out == "":
		return usageError(stderr, "run", "--out DIR is required")
	case f.backend != cpu.Kind.Name && f.backend != simt.Kind.Name:
		return usageError(stderr, "run", "unknown backend %q (expected %s or %s)", f.backend, cpu.Kind.Name, simt.Kind.Name)
	case checkThreads(f.threads) != nil:
		return usageError(stderr, "run", "%v", checkThreads(f.threads))
	}
	specs, err := planio.Specs(f.ins)
	if err != nil {
		return usageError(stderr, "run", "%v", err)
	}
	if err := runPlan(fs.Arg(0), f, specs, stdout); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// runPlan loads a compiled plan and its parameters (everything checked
// first), reads or draws its inputs, runs it once and writes the inputs
// it drew and its outputs: nothing is written unless the run succeeds.
func runPlan(dir string, f runFlags, specs map[string]string, stdout io.Writer) error {
	var prog *executor.Program
	var params map[string]*tensor.Tensor
	p, err := planio.Read(dir, func(p *plan.Plan) (err error) {
		if prog, err = executor.Open(p, dir, f.backend, executor.Options{Threads: f.threads}); err != nil {
			return err
		}
		for _, n := range prog.Notes {
			toolchain.Warn("%s", n)
		}
		params, err = planio.Params(p, dir, f.params)
		return err
	})
	if prog != nil {
		defer prog.Close()
	}
	if err != nil {
		return err
	}
	drawn := map[string]*tensor.Tensor{}
	draw := func(b plan.Binding) (*tensor.Tensor, error) {
		if !f.random {
			return nil, fmt.Errorf("input %s (%s%v) is missing: give it with --in %s=PATH.npy, or use --random-inputs", b.Name, b.DType, b.Shape, b.Name)
		}
		t, err := randomPlanInput(b, f.seed)
		if len(p.Next) > 0 && b.Name == autodiff.StepInput && len(b.Shape) == 0 {
			t = tensor.Scalar(lang.ParseDType(b.DType), 1) // Adam's step number: the first
		}
		drawn[b.Name] = t
		return t, err
	}
	inputs, err := planio.Inputs(p, specs, draw)
	if err != nil {
		return err
	}
	outputs, err := prog.Run(inputs, params)
	if err != nil {
		return err
	}
	var out planio.Folder
	out.Read(readFiles(specs, f.params)...)
	for _, b := range p.Inputs {
		if t, ok := drawn[b.Name]; ok {
			addDrawn(&out, b.Name, t)
		}
	}
	out.Outputs(outputs)
	out.NextParams(p, params, outputs)
	return out.Write(f.out, stdout)
}

// randomPlanInput draws a plan input as eval's --random-inputs does.
func randomPlanInput(b plan.Binding, seed uint64) (*tensor.Tensor, error) {
	shape := make([]lang.Dim, len(b.Shape))
	for i, n := range b.Shape {
		shape[i] = lang.Const(n)
	}
	return randomInput(&ir.Value{Name: b.Name, DType: lang.ParseDType(b.DType), Shape: shape}, seed, b.Classes)
}
