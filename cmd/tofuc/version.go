package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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
	fmt.Fprintf(stdout, "llc:  %s\n", describeLLC())
	fmt.Fprintf(stdout, "z3:   %s\n", describeLibrary("libz3.so.4", "libz3.so"))
	fmt.Fprintf(stdout, "cuda: %s\n", cuda.Probe())
	return exitOK
}

// findLLC locates llc: $TOFUC_LLC, else llc-14 or llc on PATH.
func findLLC() (string, error) {
	if p := os.Getenv("TOFUC_LLC"); p != "" {
		return p, nil
	}
	for _, name := range []string{"llc-14", "llc"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found (set TOFUC_LLC, or install Debian's llvm-14)")
}

func describeLLC() string {
	path, err := findLLC()
	if err != nil {
		return err.Error()
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return fmt.Sprintf("%s (does not run: %v)", path, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "LLVM version") {
			return fmt.Sprintf("%s (%s)", path, strings.TrimSpace(line))
		}
	}
	return path
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
