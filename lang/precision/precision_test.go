package precision

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNames: every mode parses from its name and back, in JSON too; an
// unknown name is refused naming the modes; "" is the default.
func TestNames(t *testing.T) {
	for _, name := range Names() {
		m, err := Parse(name)
		if err != nil || m.String() != name {
			t.Errorf("Parse(%q) = %v, %v", name, m, err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Mode
		if err := json.Unmarshal(b, &back); err != nil || back != m {
			t.Errorf("%s: JSON %s read back as %v, %v", name, b, back, err)
		}
	}
	if m, err := Parse(""); err != nil || m != Default {
		t.Errorf(`Parse("") = %v, %v`, m, err)
	}
	_, err := Parse("fp8")
	if err == nil || !strings.Contains(err.Error(), "exact, f32, tf32, bf16, f16") {
		t.Errorf("Parse(fp8): %v", err)
	}
	var m Mode
	if err := json.Unmarshal([]byte(`"double"`), &m); err == nil {
		t.Error("a plan's unknown precision read")
	}
	if _, err := json.Marshal(Mode(9)); err == nil {
		t.Error("mode 9 written")
	}
	if Exact.InF32() || !F32.InF32() || !BF16.InF32() {
		t.Error("InF32")
	}
}
