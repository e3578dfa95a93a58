package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"tofuc/codegen/toolchain"
	"tofuc/runtime/cuda"
)

// version is tofuc's release; `make build` can override it with -ldflags.
var version = "0.1.0-dev"

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("version", stderr)
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "version", "unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintf(stdout, "tofuc %s\n", version)
	describeTools(stdout)
	fmt.Fprintf(stdout, "z3:   %s\n", describeLibrary("libz3.so.4", "libz3.so"))
	fmt.Fprintf(stdout, "cuda: %s\n", cuda.Probe())
	return exitOK
}

// describeTools names the code generator's tools and compile cache
// (codegen/toolchain finds them), or says what is missing or wrong.
func describeTools(stdout io.Writer) {
	t, err := toolchain.Find()
	if err != nil {
		fmt.Fprintf(stdout, "tools: %v\n", err)
		return
	}
	fmt.Fprintf(stdout, "llc:  %s (%s)\nopt:  %s\ncc:   %s\n", t.LLC, t.LLCVersion, t.Opt, t.CC)
	if t.Cache == nil {
		fmt.Fprintln(stdout, "cache: off")
		return
	}
	fmt.Fprintf(stdout, "cache: %s (at most %d MiB, TOFUC_CACHE_SIZE)\n", t.Cache.Dir, cmp.Or(t.Cache.Limit, toolchain.DefaultMaxBytes)>>20)
}

// describeLibrary looks for a shared library where the dynamic loader would.
func describeLibrary(names ...string) string {
	dirs := []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib/x86_64-linux-gnu"}
	dirs = append(filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")), dirs...)
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return "not found (" + strings.Join(names, " or ") + ")"
}
