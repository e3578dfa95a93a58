// Package scripts holds the tests of the repository's shell scripts.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSystem is a PATH of stand-ins for the commands deps.sh and the
// Makefile's deps recipe run (id, dpkg-query, dpkg, apt-get, sudo), which
// log their calls instead of installing anything.
type fakeSystem struct {
	dir, log string
	env      []string
}

// newFakeSystem fakes a machine where the user has uid, installed lists
// the installed packages, removed those removed but not purged, sudo says
// whether sudo exists and aptStatus is apt-get's exit status.
func newFakeSystem(t *testing.T, uid string, installed, removed []string, sudo bool, aptStatus string) *fakeSystem {
	t.Helper()
	dir := t.TempDir()
	f := &fakeSystem{dir: dir, log: filepath.Join(dir, "calls.log")}
	scripts := map[string]string{
		"id": `[ "$1" = -u ] && echo "$FAKE_UID"`,
		"dpkg-query": `for p in $FAKE_INSTALLED; do [ "$p" = "$3" ] && { printf 'install ok installed'; exit 0; }; done
for p in $FAKE_REMOVED; do [ "$p" = "$3" ] && { printf 'deinstall ok config-files'; exit 0; }; done
echo "dpkg-query: no packages found matching $3" >&2; exit 1`,
		"dpkg":    `for p in $FAKE_INSTALLED $FAKE_REMOVED; do [ "$p" = "$2" ] && exit 0; done; exit 1`,
		"apt-get": `echo "apt-get $* uid=$FAKE_UID DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> "$FAKE_LOG"; exit $FAKE_APT_STATUS`,
	}
	if sudo {
		scripts["sudo"] = `echo "sudo $*" >> "$FAKE_LOG"; FAKE_UID=0 exec "$@"`
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, real := range []string{"env", "sh", "true"} { // the only real commands
		path, err := exec.LookPath(real)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(dir, real)); err != nil {
			t.Fatal(err)
		}
	}
	f.env = []string{"PATH=" + dir, "FAKE_LOG=" + f.log, "FAKE_UID=" + uid, "FAKE_APT_STATUS=" + aptStatus,
		"FAKE_INSTALLED=" + strings.Join(installed, " "), "FAKE_REMOVED=" + strings.Join(removed, " ")}
	return f
}

// run runs a command on the fake system; it returns the output and the
// logged calls.
func (f *fakeSystem) run(t *testing.T, name string, args ...string) (out string, calls []string, err error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = f.env
	b, err := cmd.CombinedOutput()
	logged, _ := os.ReadFile(f.log)
	if s := strings.TrimSpace(string(logged)); s != "" {
		calls = strings.Split(s, "\n")
	}
	return string(b), calls, err
}

func TestDepsScript(t *testing.T) {
	script, err := filepath.Abs("deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	const (
		update  = "apt-get update -qq uid=0 DEBIAN_FRONTEND=noninteractive"
		install = "apt-get install -y -qq chromium libz3-dev uid=0 DEBIAN_FRONTEND=noninteractive"
	)
	for _, tc := range []struct {
		name       string
		uid        string
		installed  []string
		removed    []string
		sudo       bool
		aptStatus  string
		wantCalls  []string
		wantErr    bool
		wantOutput string
	}{
		{name: "all installed: nothing to do", uid: "1000", installed: []string{"llvm-14", "chromium", "libz3-dev"},
			wantCalls: nil},
		{name: "root installs directly", uid: "0", installed: []string{"llvm-14"},
			wantCalls: []string{update, install}, wantOutput: "installing: chromium libz3-dev"},
		{name: "a user installs through sudo", uid: "1000", installed: []string{"llvm-14"}, sudo: true,
			wantCalls: []string{"sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq", update,
				"sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium libz3-dev", install}},
		{name: "removed but not purged is missing", uid: "0", installed: []string{"llvm-14", "libz3-dev"}, removed: []string{"chromium"},
			wantCalls: []string{update, "apt-get install -y -qq chromium uid=0 DEBIAN_FRONTEND=noninteractive"}},
		{name: "a user without sudo is told what to do", uid: "1000", installed: []string{"llvm-14"},
			wantErr: true, wantOutput: "missing: chromium libz3-dev; run as root, or install sudo"},
		{name: "a failing apt-get fails", uid: "0", aptStatus: "100",
			wantCalls: []string{"apt-get update -qq uid=0 DEBIAN_FRONTEND=noninteractive"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.aptStatus
			if status == "" {
				status = "0"
			}
			f := newFakeSystem(t, tc.uid, tc.installed, tc.removed, tc.sudo, status)
			out, calls, err := f.run(t, "/bin/sh", script, "llvm-14", "chromium", "libz3-dev")
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want an error: %v\n%s", err, tc.wantErr, out)
			}
			if strings.Join(calls, "\n") != strings.Join(tc.wantCalls, "\n") {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(tc.wantCalls, "\n"))
			}
			if !strings.Contains(out, tc.wantOutput) || (tc.wantOutput == "" && !tc.wantErr && len(tc.wantCalls) == 0 && out != "") {
				t.Errorf("output %q, want %q", out, tc.wantOutput)
			}
		})
	}
}

// TestMakeDeps runs the Makefile's deps target, as `make test` and
// `make run` do, as root with a package missing, and as a user with sudo.
func TestMakeDeps(t *testing.T) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	for _, tc := range []struct {
		uid   string
		sudo  bool
		calls int
	}{{"0", false, 2}, {"1000", true, 4}} {
		f := newFakeSystem(t, tc.uid, []string{"llvm-14", "libz3-dev", "gcc", "libc6-dev", "ca-certificates", "libopenblas0-pthread", "libdnnl2", "openmpi-bin"}, nil, tc.sudo, "0")
		// GO=true: `go mod download` is not what is tested here
		out, calls, err := f.run(t, makePath, "-C", "..", "-s", "deps", "EXTRA_PKGS=chromium", "GO=true")
		if err != nil {
			t.Fatalf("uid %s: make deps: %v\n%s", tc.uid, err, out)
		}
		if len(calls) != tc.calls || !strings.HasPrefix(calls[len(calls)-1], "apt-get install -y -qq chromium uid=0") {
			t.Errorf("uid %s: make deps ran:\n%s\nwant apt-get install chromium as root", tc.uid, strings.Join(calls, "\n"))
		}
	}
}
