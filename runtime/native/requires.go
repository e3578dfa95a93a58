package native

import (
	"bytes"
	"debug/elf"
	"fmt"
	"slices"
	"strings"

	"tofuc/runtime/plan"
)

// checkRequires checks, before a shared object is loaded, the CPU
// extensions its module of a plan requires: each one this tofuc knows,
// the list the object at path records it was compiled for
// (plan.RequiresSymbol, read from the file), and each one this
// CPU has. A plan edited to require less cannot skip the check, and a
// plan naming an unknown extension is said to be at fault, not the CPU.
func checkRequires(m plan.Module, path string, data []byte) error {
	if unknown := UnknownFeatures(m.Requires); len(unknown) > 0 {
		return fmt.Errorf("the plan says %s requires %s, which this tofuc knows no CPU extension as: the plan was edited or written by another tofuc (compile it again)", path, strings.Join(unknown, ", "))
	}
	built, err := objectRequires(data)
	if err != nil {
		return fmt.Errorf("%s holds no record of the CPU extensions it was compiled for (%w): compile the plan again", path, err)
	}
	if !slices.Equal(built, m.Requires) {
		return fmt.Errorf("requires [%s] in the plan, but %s was compiled for a CPU with [%s]: the plan does not match its objects (compile it again)", strings.Join(m.Requires, " "), path, strings.Join(built, " "))
	}
	if missing := MissingFeatures(built); len(missing) > 0 {
		return fmt.Errorf("%s was compiled for a CPU with %s, which this one lacks: compile the plan again on this machine", path, strings.Join(missing, ", "))
	}
	return nil
}

// objectRequires reads a shared object's record of the CPU extensions it
// was compiled for from its bytes, without loading it.
func objectRequires(data []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, err
	}
	for _, s := range syms {
		if s.Name != plan.RequiresSymbol {
			continue
		}
		if int(s.Section) >= len(f.Sections) {
			return nil, fmt.Errorf("%s in no section", s.Name)
		}
		sec := f.Sections[s.Section]
		body, err := sec.Data()
		if err != nil {
			return nil, err
		}
		if s.Value < sec.Addr || s.Value-sec.Addr > uint64(len(body)) || s.Size > uint64(len(body))-(s.Value-sec.Addr) {
			return nil, fmt.Errorf("%s outside its section", s.Name)
		}
		text, _, _ := strings.Cut(string(body[s.Value-sec.Addr:][:s.Size]), "\x00")
		if text == "" {
			return nil, nil
		}
		return strings.Split(text, ","), nil
	}
	return nil, fmt.Errorf("no symbol %s", plan.RequiresSymbol)
}

// RequiresSource is the C defining a shared object's record of the CPU
// extensions it was compiled for (plan.RequiresSymbol).
func RequiresSource(features []string) string {
	return fmt.Sprintf("const char %s[] = %q;\n", plan.RequiresSymbol, strings.Join(features, ","))
}
