package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/lang"
)

// TestEveryCommandSurvives runs every command of the command table (so a
// command added later is covered without touching this test) as a real
// process: with --help, with no arguments, and on a model with extreme
// --set values of each of its integer attributes. No run may panic, die
// with a Go runtime error or hang; --help prints the command's help on
// stdout and succeeds; other runs exit 0, 1 or 2, and one that succeeds
// prints no negative size (a wrapped int64).
//
// Each run gets the flags the command's --help lists from a fixed set of
// well-known ones (an output directory, a device count, random inputs),
// so that the extreme values reach the model rather than a usage error.
func TestEveryCommandSurvives(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary a few hundred times")
	}
	bin := buildTofuc(t)
	model := filepath.Join("..", "..", "examples", "mlp.tdl")
	attrs := intAttributes(t, model)
	extremes := []string{"9223372036854775807", "-9223372036854775808", "4611686018427387904", "1000000000000000", "300000000", "0"}
	for _, name := range sortedKeys(commands) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := invocation(commands[name])
			help := runSurviving(t, bin, append(cmd, "--help")...)
			if help.status != exitOK || !strings.Contains(help.stdout, "tofuc") || help.stderr != "" {
				t.Errorf("tofuc %s --help: exit %d, stdout %q, stderr %q; want the help on stdout", strings.Join(cmd, " "), help.status, clip(help.stdout), clip(help.stderr))
			}
			runSurviving(t, bin, name) // without arguments (`rules generate` alone is a long run)
			flags := wellKnownFlags(help.stdout+help.stderr, t.TempDir())
			for _, attr := range attrs {
				for _, v := range extremes {
					args := append(append(cmd, model, "--set", attr+"="+v), flags...)
					runSurviving(t, bin, args...)
				}
			}
		})
	}
}

// invocation is how a command is run: its name and, for a command with
// subcommands, the subcommand its usage shows (`tofuc rules generate
// [-o FILE] ...` gives rules generate).
func invocation(c *command) []string {
	out := []string{c.name}
	words := strings.Fields(c.usage)
	for _, w := range words[min(2, len(words)):] {
		if w == "" || w != strings.ToLower(w) || strings.ContainsAny(w[:1], "[-.") {
			break
		}
		out = append(out, w)
	}
	return out
}

// wellKnownFlags gives values to the flags a command's help lists that
// make it do its work: where to write, how many devices, random inputs.
func wellKnownFlags(help, dir string) []string {
	var out []string
	for _, f := range []struct {
		flag  string
		value []string
	}{
		{"--out", []string{"--out", filepath.Join(dir, "out")}},
		{"--output", []string{"--output", filepath.Join(dir, "out.tdl")}},
		{"--report", []string{"--report", filepath.Join(dir, "report")}},
		{"--devices", []string{"--devices", "8"}},
		{"--random-inputs", []string{"--random-inputs"}},
	} {
		if regexp.MustCompile(`(^|\s)` + f.flag + `\b`).MatchString(help) {
			out = append(out, f.value...)
		}
	}
	return out
}

type runResult struct {
	status         int
	stdout, stderr string
}

// negativeSize matches a size printed from a wrapped int64.
var negativeSize = regexp.MustCompile(`(^|[\s(])-\d[\d.]*\s*(B|KiB|MiB|GiB|TiB|MB|GFLOP)\b`)

// runSurviving runs the binary under a 4 GiB address-space limit and a
// minute's timeout, and fails the test on a crash, a hang, an unknown exit
// status or a negative size in a successful run's output.
func runSurviving(t *testing.T, bin string, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v 4194304 && exec "$@"`, "sh", bin}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := runResult{status: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	line := "tofuc " + strings.Join(args, " ")
	switch {
	case ctx.Err() != nil:
		t.Errorf("%s: still running after a minute", line)
	case err != nil && r.status < 0:
		t.Errorf("%s: %v", line, err)
	case strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "fatal error"):
		t.Errorf("%s: crashed (exit %d):\n%s", line, r.status, clip(r.stderr))
	case r.status != exitOK && r.status != exitUser && r.status != exitUsage:
		t.Errorf("%s: exit %d\n%s", line, r.status, clip(r.stderr))
	case r.status == exitOK && negativeSize.MatchString(r.stdout):
		t.Errorf("%s: a negative size in the output:\n%s", line, clip(r.stdout))
	}
	return r
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// intAttributes lists a file's model attributes with integer defaults.
func intAttributes(t *testing.T, path string) []string {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, md := range m.File.Models {
		for _, a := range md.Attrs {
			if n, ok := a.Default.(*lang.Num); ok && !n.IsFloat {
				out = append(out, a.Name)
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatalf("%s: no integer attributes", path)
	}
	return out
}

// buildTofuc builds the command into a temporary directory.
func buildTofuc(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "tofuc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
