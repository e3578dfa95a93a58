package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"tofuc/runtime/safefile"

	"tofuc/lang"
	"tofuc/parser"
)

func runFmt(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("fmt", stderr)
	write := fs.BoolP("write", "w", false, "write the result back to each file")
	list := fs.BoolP("list", "l", false, "list the files whose formatting differs")
	diff := fs.BoolP("diff", "d", false, "show the changes as a unified diff")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() == 0 {
		return usageError(stderr, "fmt", "no files given")
	}
	if n := countTrue(*write, *list, *diff); n > 1 {
		return usageError(stderr, "fmt", "-w, -l and -d exclude each other")
	}
	status := exitOK
	for _, path := range fs.Args() {
		src, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: cannot read: %v\n", path, err)
			status = exitUser
			continue
		}
		f, err := parser.Parse(path, src)
		if err != nil {
			printDiagnostics(stderr, err.(lang.ErrorList))
			status = exitUser
			continue
		}
		out := lang.Format(f, src)
		changed := !bytes.Equal(out, src)
		switch {
		case *write:
			if changed {
				if err := safefile.WriteFile(path, out, 0o644); err != nil {
					fmt.Fprintf(stderr, "%s: %v\n", path, err)
					status = exitUser
				}
			}
		case *list:
			if changed {
				fmt.Fprintln(stdout, path)
			}
		case *diff:
			if changed {
				io.WriteString(stdout, unifiedDiff(path, string(src), string(out)))
			}
		default:
			stdout.Write(out)
		}
	}
	return status
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// unifiedDiff compares two texts line by line (longest common subsequence)
// and prints the differences with three lines of context.
func unifiedDiff(path, a, b string) string {
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s (formatted)\n", path, path)
	const context = 3
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-context)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run-end > 2*context || run == len(ops) {
				end = min(run, end+context)
				break
			}
			end = run
		}
		ai, bi := ops[start].ai, ops[start].bi
		var an, bn int
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				an++
			}
			if o.kind != '-' {
				bn++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", ai+1, an, bi+1, bn)
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(o.text)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

type diffOp struct {
	kind   byte // ' ', '-', '+'
	text   string
	ai, bi int // line numbers (0-based) in a and b where this op stands
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func diffLines(x, y []string) []diffOp {
	n, m := len(x), len(y)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, diffOp{' ', x[i], i, j})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			ops = append(ops, diffOp{'+', y[j], i, j})
			j++
		default:
			ops = append(ops, diffOp{'-', x[i], i, j})
			i++
		}
	}
	return ops
}
