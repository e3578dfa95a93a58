package main

import (
	"strings"
	"tofuc/runtime/hostlib"

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
	fs.StringSliceVar(list, "backends", []string{"all"}, what+"the host libraries offered the contractions beside tofuc's kernels, placed by measured time in the f32 modes: all (those found), none, or a list of "+strings.Join(hostlib.Names(), ", ")+" (docs/placement.md)")
}
