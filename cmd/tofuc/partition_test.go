package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPartitionCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "report")
	var out, errb bytes.Buffer
	if code := run([]string{"partition", "../../examples/mlp.tdl", "--train", "--devices", "4", "--report", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"report.txt", "report.json", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "data_parallel") {
		t.Errorf("summary lacks the baselines:\n%s", out.String())
	}
	// The report's own plan, checked, costs the optimum.
	out.Reset()
	if code := run([]string{"partition", "../../examples/mlp.tdl", "--train", "--devices", "4", "--strategy", filepath.Join(dir, "report.json")}, &out, &errb); code != exitOK {
		t.Fatalf("--strategy: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "your plan") {
		t.Errorf("no checked plan in:\n%s", out.String())
	}
}

func TestPartitionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--devices", "1"}, exitUsage, "2 to 1024"},
		{[]string{"--devices", "6", "--factors", "2,3"}, exitUsage, "at most the one before"},
		{[]string{"--devices", "4", "--factors", "3,2"}, exitUsage, "multiply to 6"},
		{[]string{"--devices", "4", "--memory", "1000", "--report", dir}, exitUser, "no plan fits"},
		{[]string{"--devices", "4", "--strategy", "missing.json"}, exitUser, "missing.json"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"partition", "../../examples/mlp.tdl"}, c.args...), &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
		t.Errorf("over the memory limit the report is still written: %v", err)
	}
}
