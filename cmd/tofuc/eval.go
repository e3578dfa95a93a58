package main

import "io"

func runEval(args []string, stdout, stderr io.Writer) int {
	return usageError(stderr, "eval", "not available yet")
}
