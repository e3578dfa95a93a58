// Package cliargs edits command lines that a command passes on to
// copies of itself (the ranks it starts).
package cliargs

import "strings"

// Without is args without flag --name and its value (given as --name=V
// or --name V).
func Without(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--"+name:
			i++ // its value
		case strings.HasPrefix(args[i], "--"+name+"="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}
