package onnx

import (
	"strconv"
	"strings"

	"tofuc/lang"
)

// reserved are TDL's reserved words, its literals and the names of
// compile-time functions a binding must not shadow.
var reserved = map[string]bool{
	"op": true, "model": true, "rule": true, "import": true, "lambda": true, "let": true, "in": true,
	"param": true, "init": true, "return": true, "for": true, "if": true, "else": true, "block": true,
	"opaque": true, "assert": true, "true": true, "false": true, "inf": true, "nan": true,
	"select": true, "like": true, "sum": true, "max": true, "min": true, "prod": true,
}

// namer gives ONNX names unique TDL identifiers.
type namer struct {
	taken map[string]bool
	avoid func(string) bool // names of operators in scope
	// last is the last suffix tried for a base name: names are never
	// released, so the next free one is beyond it, and the many values
	// named alike (an unrolled recurrence's states) take linear time
	// rather than probing every suffix from 1 each time.
	last map[string]int
}

// ident turns an ONNX name into an unused TDL identifier: characters
// outside [A-Za-z0-9_] become '_', a leading digit gets a 'v', and names
// that are reserved, operator names, dtypes or already taken get a suffix.
func (n *namer) ident(onnxName string) string {
	var b strings.Builder
	for _, r := range onnxName {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	base := strings.Trim(b.String(), "_")
	if base == "" {
		base = "v"
	}
	if base[0] >= '0' && base[0] <= '9' {
		base = "v" + base
	}
	if n.last == nil {
		n.last = map[string]int{}
	}
	name := base
	for n.taken[name] || reserved[name] || lang.ParseDType(name) != lang.Invalid || n.avoid(name) {
		n.last[base]++
		name = base + "_" + strconv.Itoa(n.last[base])
	}
	n.taken[name] = true
	return name
}
