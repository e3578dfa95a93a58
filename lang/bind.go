package lang

import (
	"fmt"
	"sort"
	"strings"
)

// ShapeUse is a declared shape and the actual shape of a value.
type ShapeUse struct {
	What     string // the value, for messages ("input x")
	Declared []Dim
	Actual   []int
}

// BindShapes binds the symbols of the declared shapes that env lacks by
// solving against the actual shapes (a dimension that is a constant
// multiple of one unbound symbol plus bound terms binds it), then from
// fallback, and checks every dimension.
func BindShapes(env map[string]int64, uses []ShapeUse, fallback map[string]int64) error {
	for _, u := range uses {
		if len(u.Declared) != len(u.Actual) {
			return fmt.Errorf("%s has shape %v, want rank %d %s", u.What, u.Actual, len(u.Declared), ShapeString(u.Declared))
		}
	}
	for progress := true; progress; {
		progress = false
		for _, u := range uses {
			for i, d := range u.Declared {
				coefs, k, ok := d.Linear()
				if !ok {
					continue
				}
				var free string
				rest := int64(u.Actual[i]) - k
				nfree := 0
				for s, a := range coefs {
					if v, ok := env[s]; ok {
						rest -= a * v
					} else {
						free = s
						nfree++
					}
				}
				if nfree != 1 {
					continue
				}
				a := coefs[free]
				if rest%a != 0 {
					return fmt.Errorf("%s: dimension %d is %d, which is not %s for any integer %s", u.What, i, u.Actual[i], d, free)
				}
				env[free] = rest / a
				progress = true
			}
		}
	}
	for s, v := range fallback {
		if _, ok := env[s]; !ok {
			env[s] = v
		}
	}
	for _, u := range uses {
		for i, d := range u.Declared {
			n, err := d.Eval(env)
			if err != nil {
				return fmt.Errorf("%s: dimension %d (%s): %w", u.What, i, d, err)
			}
			if n != int64(u.Actual[i]) {
				return fmt.Errorf("%s has shape %v, want %s = %d in dimension %d (with %s)", u.What, u.Actual, d, n, i, symString(env, d.Symbols()))
			}
		}
	}
	return nil
}

func symString(env map[string]int64, syms []string) string {
	sort.Strings(syms)
	parts := make([]string, len(syms))
	for i, s := range syms {
		parts[i] = fmt.Sprintf("%s = %d", s, env[s])
	}
	if len(parts) == 0 {
		return "no symbols"
	}
	return strings.Join(parts, ", ")
}
