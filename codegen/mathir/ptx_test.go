package mathir_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"tofuc/codegen/mathir"
	"tofuc/codegen/target/nvptx"
	"tofuc/codegen/toolchain"
)

// TestPTX: the library compiles for sm_80 into PTX (the nvptx target's LLC: opt
// -O3, which inlines the library into the wrappers, then llc) that
// defines every wrapper, calls nothing outside (no .extern), and rounds
// every floating operation explicitly (.rn, which LLC's
// -nvptx-fma-level=0 gives), never approximately nor flushing
// subnormals: ptxas may fuse a multiply and an add written without .rn,
// which would change results.
func TestPTX(t *testing.T) {
	tools, err := toolchain.Find()
	if err != nil {
		t.Skipf("needs llc-14: %v", err)
	}
	out, err := tools.Compile(context.Background(), []byte(mathir.TestModule(false).String()), nvptx.LLC)
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(out)
	if strings.Contains(ptx, ".extern") {
		t.Errorf("PTX has an .extern declaration:\n%s", grepLines(ptx, ".extern"))
	}
	for _, name := range mathir.Tested() {
		sym := "one_" + strings.ReplaceAll(name, ".", "_$_")
		if !regexp.MustCompile(`\.func\s+(\([^)]*\)\s*)?` + regexp.QuoteMeta(sym) + `\(`).MatchString(ptx) {
			t.Errorf("PTX does not define %s", sym)
		}
	}
	if bad := regexp.MustCompile(`\b(fma\.|(add|sub|mul|div|sqrt)\.f(32|64)|div\.full|[a-z]+\.approx|[a-z.]+\.ftz).*`).FindAllString(ptx, 3); bad != nil {
		t.Errorf("PTX has floating operations ptxas may contract, or approximate ones: %q", bad)
	}
}

// TestPTXF32: the f32 library compiles for sm_80 too, calls nothing
// outside and approximates nothing (no .approx, no flushed subnormals:
// its stated ulps are the library's, not the hardware's).
func TestPTXF32(t *testing.T) {
	tools, err := toolchain.Find()
	if err != nil {
		t.Skipf("needs llc-14: %v", err)
	}
	out, err := tools.Compile(context.Background(), []byte(mathir.F32Module().String()), nvptx.LLC)
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(out)
	if strings.Contains(ptx, ".extern") {
		t.Errorf("PTX has an .extern declaration:\n%s", grepLines(ptx, ".extern"))
	}
	for _, name := range mathir.F32Names() {
		if !strings.Contains(ptx, ".entry vec_"+name+"(") && !regexp.MustCompile(`\.func\s+vec_`+name+`\(`).MatchString(ptx) {
			t.Errorf("PTX does not define vec_%s", name)
		}
	}
	if bad := regexp.MustCompile(`\b[a-z]+\.approx.*|[a-z.]+\.ftz.*`).FindAllString(ptx, 3); bad != nil {
		t.Errorf("PTX has approximate operations: %q", bad)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
