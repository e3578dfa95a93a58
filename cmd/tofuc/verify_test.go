package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tdl")
	os.WriteFile(good, []byte("rule comm(x: [M, N], y: [M, N]): x + y == y + x\n"+
		"rule idem(x: [M, N]): relu(relu(x)) == relu(x)\n"), 0o644)
	bad := filepath.Join(dir, "bad.tdl")
	os.WriteFile(bad, []byte("rule comm(x: [M, N], y: [M, N]): x + y == y + x\n"+
		"rule sub_comm(x: [M, N], y: [M, N]): x - y == y - x\n"), 0o644)

	status, out, stderr := tofuc("verify", good)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if status != exitOK || lines[len(lines)-1] != "1 proved, 1 bounded, 0 refuted, 0 unknown" {
		t.Errorf("verify good.tdl: exit %d\n%s%s", status, out, stderr)
	}
	if !strings.Contains(out, "shapes M,N<=2") {
		t.Errorf("the bounded level should state each symbol's bound:\n%s", out)
	}
	status, out, _ = tofuc("verify", bad)
	if status != exitUser || !strings.HasSuffix(strings.TrimSpace(out), "1 proved, 0 bounded, 1 refuted, 0 unknown") {
		t.Errorf("verify bad.tdl: exit %d\n%s", status, out)
	}
	if !strings.Contains(out, "confirmed by the interpreter") {
		t.Errorf("a refutation should show its counterexample:\n%s", out)
	}
	status, out, _ = tofuc("verify", "--json", bad)
	var doc verifyJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil || status != exitUser {
		t.Fatalf("verify --json: exit %d, %v\n%s", status, err, out)
	}
	if len(doc.Rules) != 2 || doc.Rules[1].Cex == nil || doc.Rules[1].Status != "refuted" {
		t.Errorf("verify --json: %+v", doc)
	}
	// A file without rules is an error, and the summary is still printed.
	status, out, stderr = tofuc("verify", "../../examples/mlp.tdl")
	if status != exitUser || !strings.Contains(stderr, "no rules in this file") || strings.TrimSpace(out) != "0 proved, 0 bounded, 0 refuted, 0 unknown" {
		t.Errorf("verify of a file without rules: exit %d\n%s%s", status, out, stderr)
	}
	if status, _, _ := tofuc("verify"); status != exitUsage {
		t.Errorf("verify with no files: exit %d, want %d", status, exitUsage)
	}
}
