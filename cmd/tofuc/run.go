package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/cpu"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
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
	case f.backend != "cpu" && f.backend != "simt":
		return usageError(stderr, "run", "unknown backend %q (expected cpu or simt)", f.backend)
	case f.threads < 0:
		return usageError(stderr, "run", "--threads must not be negative")
	}
	specs, err := inputSpecs(f.ins)
	if err != nil {
		return usageError(stderr, "run", "%v", err)
	}
	outputs, err := runPlan(fs.Arg(0), f, specs, stdout)
	if err != nil {
		return fail(stderr, err)
	}
	if err := writeOutputs(f.out, outputs, nil, stdout); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// runPlan loads a compiled plan and runs it once.
func runPlan(dir string, f runFlags, specs map[string]string, stdout io.Writer) (map[string]*tensor.Tensor, error) {
	p, err := plan.Read(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, err
	}
	inputs, err := readInputs(specs)
	if err != nil {
		return nil, err
	}
	for _, b := range p.Inputs {
		if inputs[b.Name] != nil {
			inputs[b.Name] = fromNPY(inputs[b.Name], lang.ParseDType(b.DType))
			continue
		}
		if !f.random {
			return nil, fmt.Errorf("input %s (%s%v) is missing: give it with --in %s=PATH.npy, or use --random-inputs", b.Name, b.DType, b.Shape, b.Name)
		}
		if inputs[b.Name], err = randomPlanInput(b, f.seed); err != nil {
			return nil, err
		}
		if err := writeDrawn(f.out, b.Name, inputs[b.Name], stdout); err != nil {
			return nil, err
		}
	}
	params, err := planParams(dir, f.params, p)
	if err != nil {
		return nil, err
	}
	var prog *cpu.Program
	if f.backend == "cpu" {
		var host *cpu.HostEngine
		if host, err = cpu.NewHost(p, dir, f.threads); err == nil {
			prog, err = cpu.Load(p, host)
		}
	} else {
		prog, err = simt.Load(p, dir, f.threads)
	}
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	return prog.Run(inputs, params)
}

// planParams reads the parameters: --params, else DIR/params.npz.
func planParams(dir, given string, p *plan.Plan) (map[string]*tensor.Tensor, error) {
	path := given
	if path == "" {
		path = filepath.Join(dir, "params.npz")
	}
	params, err := npy.ReadNPZ(path)
	if errors.Is(err, os.ErrNotExist) && given == "" && len(p.Params) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	for _, b := range p.Params {
		params[b.Name] = fromNPY(params[b.Name], lang.ParseDType(b.DType))
	}
	return params, nil
}

// randomPlanInput draws a plan input as eval's --random-inputs does.
func randomPlanInput(b plan.Binding, seed uint64) (*tensor.Tensor, error) {
	shape := make([]lang.Dim, len(b.Shape))
	for i, n := range b.Shape {
		shape[i] = lang.Const(n)
	}
	return randomInput(&ir.Value{Name: b.Name, DType: lang.ParseDType(b.DType), Shape: shape}, seed, b.Classes)
}
