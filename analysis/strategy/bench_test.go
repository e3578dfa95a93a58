package strategy_test

import (
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/analysis/strategy"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// BenchmarkAnalyseStdlib analyses every standard-library operator with
// symbolic shapes (the instances are built outside the timing; the
// Instantiate variant includes building them). The budget is
// 50 ms for the whole library.
func BenchmarkAnalyseStdlib(b *testing.B) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		b.Fatal(err)
	}
	var ops []*lang.OpDecl
	var insts []*ir.Instance
	for _, op := range p.StdOps() {
		inst, err := check.Standalone(op)
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, op)
		insts = append(insts, inst)
	}
	b.Run("Analyse", func(b *testing.B) {
		for range b.N {
			for _, inst := range insts {
				strategy.Analyse(inst)
			}
		}
	})
	b.Run("Instantiate+Analyse", func(b *testing.B) {
		for range b.N {
			for _, op := range ops {
				inst, _ := check.Standalone(op)
				strategy.Analyse(inst)
			}
		}
	})
}
