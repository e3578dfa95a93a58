package main

import (
	"fmt"
	"io"

	"tofuc/codegen/toolchain"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/executor"
)

// maxBatch bounds --batch.
const maxBatch = 1 << 30

// runDynamic runs a plan compiled with --dynamic, as runPlan runs one
// of a fixed batch: at the batch of the inputs given, else --batch,
// else the largest size compiled.
func runDynamic(dir string, f runFlags, specs map[string]string, stdout io.Writer) error {
	r, err := dynamic.Open(dir, dynamic.OnKind(f.backend, executor.Options{Threads: f.threads}))
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
	if err := r.CheckMemory(n); err != nil {
		return err
	}
	return newInputs(r.At(n), f, specs).runAndWrite(r.Run, params, stdout)
}

// givenBatch is the batch a run of a dynamic plan computes: that of the
// first batch input given with --in, else --batch, else the largest
// size compiled; --batch and an input must agree.
func givenBatch(r *dynamic.Runner, f runFlags, specs map[string]string) (int64, error) {
	n, ok, err := r.FileBatch(specs)
	switch {
	case err != nil:
		return 0, err
	case ok && f.batch != 0 && f.batch != n:
		return 0, fmt.Errorf("--batch %d, but the inputs given hold %d samples", f.batch, n)
	case ok:
		return n, nil
	case f.batch != 0:
		return f.batch, nil
	}
	return r.Manifest.Largest(), nil
}
