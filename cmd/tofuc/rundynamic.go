package main

import (
	"fmt"
	"io"

	"tofuc/codegen/toolchain"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/executor"
	"tofuc/runtime/npy"
)

// maxBatch bounds --batch.
const maxBatch = 1 << 30

// runDynamic runs a plan compiled with --dynamic, as runPlan runs one
// of a fixed batch: at the batch of the inputs given, else --batch,
// else the largest size compiled.
func runDynamic(dir string, f runFlags, specs map[string]string, stdout io.Writer) error {
	r, err := dynamic.Open(dir, f.backend, executor.Options{Threads: f.threads})
	if err != nil {
		return err
	}
	defer r.Close()
	for _, n := range r.Notes {
		toolchain.Warn("%s", n)
	}
	params, err := r.Params(f.params)
	if err != nil {
		return err
	}
	n, err := givenBatch(r, f, specs)
	if err != nil {
		return err
	}
	at := *r.Plan
	at.Inputs, at.Outputs = r.Bindings(n)
	ins := newInputs(&at, f, specs)
	if err := ins.read(); err != nil {
		return err
	}
	outputs, err := r.Run(ins.values, params)
	if err != nil {
		return err
	}
	out := ins.folder()
	out.Outputs(outputs)
	return out.Write(f.out, stdout)
}

// givenBatch is the batch a run of a dynamic plan computes: that of the
// first batch input given with --in (its header read), else --batch,
// else the largest size compiled; --batch and an input must agree.
func givenBatch(r *dynamic.Runner, f runFlags, specs map[string]string) (int64, error) {
	for _, a := range r.Manifest.Inputs {
		path, ok := specs[a.Name]
		if !ok || !a.Batched() {
			continue
		}
		m, err := npy.Map(path)
		if err != nil {
			return 0, fmt.Errorf("--in %s: %w", a.Name, err)
		}
		shape := m.Shape()
		m.Close()
		if a.Dim >= len(shape) || shape[a.Dim] == 0 || int64(shape[a.Dim])%a.Factor != 0 {
			return 0, fmt.Errorf("--in %s: its shape %v has no batch along dimension %d (a positive multiple of %d)", a.Name, shape, a.Dim, a.Factor)
		}
		n := int64(shape[a.Dim]) / a.Factor
		if f.batch != 0 && f.batch != n {
			return 0, fmt.Errorf("--batch %d, but --in %s holds %d samples", f.batch, a.Name, n)
		}
		return n, nil
	}
	if f.batch != 0 {
		return f.batch, nil
	}
	return r.Manifest.Largest(), nil
}
