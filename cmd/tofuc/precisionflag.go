package main

import (
	"strings"
	"tofuc/runtime/hostlib"
	"tofuc/runtime/plan"

	"github.com/spf13/pflag"

	"tofuc/lang/precision"
)

// precisionFlag is --precision: the arithmetic of compiled kernels.
type precisionFlag precision.Mode

func (p *precisionFlag) Set(s string) error {
	m, err := precision.Parse(s)
	if err != nil {
		return err
	}
	*p = precisionFlag(m)
	return nil
}

func (p *precisionFlag) String() string { return precision.Mode(*p).String() }

func (p *precisionFlag) Type() string { return "MODE" }

// registerPrecision adds --precision to fs, for commands whose what says
// which (compile; the compiled backends of eval, bench and onnx-test).
func registerPrecision(fs *pflag.FlagSet, p *precision.Mode, what string) {
	*p = precision.Default
	fs.Var((*precisionFlag)(p), "precision", what+"the arithmetic of the compiled kernels: "+strings.Join(precision.Names(), ", ")+" (docs/precision.md)")
}

// registerBackends adds --backends to fs: the vendor libraries placement
// may choose beside the generated kernels (docs/placement.md).
func registerBackends(fs *pflag.FlagSet, list *[]string, what string) {
	fs.StringSliceVar(list, "backends", []string{"all"}, what+"the libraries offered the contractions beside tofuc's kernels: all (the host's found here), none, or a list of "+strings.Join(hostlib.Names(), ", ")+" (the host's, placed by measured time in the modes but exact) and "+strings.Join(plan.GPUBackends, ", ")+" (a GPU's, in f32 and tf32, loaded where the plan runs) (docs/placement.md)")
}
