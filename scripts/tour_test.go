package scripts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tofuc/internal/shared"
)

// TestReadmeTour runs the README's tour as a newcomer would: in a fresh
// clone of this repository, with the shared data beside it as ../shared,
// every `$ command` of the tour's code blocks in order. Each must exit 0
// (or the status its `# exit status N` comment says), and print the lines
// the README shows after it, in order ("..." skips lines).
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tofuc in a fresh clone and runs the tour (a few minutes)")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to clone the repository with")
	}
	data := shared.Dir(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := tourSteps(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	clone := filepath.Join(tmp, "tofuc")
	if out, err := exec.Command("git", "clone", "--quiet", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if err := os.Symlink(data, filepath.Join(tmp, "shared")); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		start := time.Now()
		out, status := runStep(t, clone, s.command)
		t.Logf("%s: exit %d, %.1f s", s.command, status, time.Since(start).Seconds())
		if status != s.status {
			t.Fatalf("README line %d: %s\nexit %d, want %d:\n%s", s.line, s.command, status, s.status, out)
		}
		if missing := missingLines(out, s.output); missing != "" {
			t.Errorf("README line %d: %s\nprints no line %q (in order) in:\n%s", s.line, s.command, missing, out)
		}
	}
}

// step is one command of the tour and what the README shows it prints.
type step struct {
	line    int // in README.md
	command string
	status  int
	output  []string // "..." skips any lines
}

var exitComment = regexp.MustCompile(`#\s*exit status (\d+)\s*$`)

// tourSteps reads the commands of the README's tour: the `$ ` lines of
// its code blocks, with continuation lines (a trailing backslash) and
// here-documents, each followed by the output it prints.
func tourSteps(readme string) ([]step, error) {
	start := strings.Index(readme, "\n## A five-minute tour")
	if start < 0 {
		return nil, fmt.Errorf("README.md has no section \"A five-minute tour\"")
	}
	end := strings.Index(readme[start+1:], "\n## ")
	if end < 0 {
		end = len(readme) - start - 1
	}
	first := strings.Count(readme[:start], "\n") + 2 // the section's first line
	lines := strings.Split(readme[start+1:start+1+end], "\n")
	var steps []step
	inBlock, blockSteps := false, 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```"):
			inBlock, blockSteps = !inBlock, 0
		case inBlock && strings.HasPrefix(l, "$ "):
			blockSteps++
			s := step{line: first + i, command: strings.TrimPrefix(l, "$ ")}
			for strings.HasSuffix(s.command, "\\") && i+1 < len(lines) {
				i++
				s.command = strings.TrimSuffix(s.command, "\\") + " " + strings.TrimSpace(lines[i])
			}
			if _, delim, ok := strings.Cut(s.command, "<<'"); ok {
				delim = delim[:strings.Index(delim, "'")]
				for i+1 < len(lines) && lines[i] != delim {
					i++
					s.command += "\n" + lines[i]
				}
			}
			if m := exitComment.FindStringSubmatch(s.command); m != nil {
				s.status, _ = strconv.Atoi(m[1])
			}
			steps = append(steps, s)
		case inBlock && blockSteps > 0 && strings.TrimSpace(l) != "":
			steps[len(steps)-1].output = append(steps[len(steps)-1].output, strings.TrimRight(l, " "))
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("the tour has no commands")
	}
	return steps, nil
}

// runStep runs a command with sh in dir, with ten minutes at most.
func runStep(t *testing.T, dir, command string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after 10 minutes", command)
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s: %v", command, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// missingLines returns the first expected line that out does not print
// in order (each a whole line, trailing spaces aside), or "".
func missingLines(out string, want []string) string {
	got := strings.Split(out, "\n")
	for i := range got {
		got[i] = strings.TrimRight(got[i], " ")
	}
	k := 0
	for _, w := range want {
		if w == "..." {
			continue
		}
		for k < len(got) && got[k] != w {
			k++
		}
		if k == len(got) {
			return w
		}
		k++
	}
	return ""
}
