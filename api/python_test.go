package api

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestPythonPackage installs the Python package as a user does, into a
// fresh virtual environment (`pip install ./python`, which builds the C
// library), and runs its tests (python/tests): the MLP and an ONNX model
// compiled and run on NumPy arrays, 100 training steps, parameters saved
// and loaded, each against the command line's results. make test
// installs Debian's python3-numpy and python3-venv; without them the test
// says so and skips.
func TestPythonPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Python package builds the C library (a minute)")
	}
	python, err := pythonWithNumPy()
	if err != nil {
		t.Skipf("%v (make test installs Debian's python3-numpy and python3-venv)", err)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "tofuc")
	run(t, repo, nil, goTool(), "build", "-o", bin, "./cmd/tofuc")
	venv := filepath.Join(tmp, "venv")
	// The system's site packages give NumPy (and torch, where present):
	// pip installs nothing from the network.
	run(t, tmp, nil, python, "-m", "venv", "--system-site-packages", venv)
	env := []string{"GO=" + goTool(), "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"}
	run(t, repo, env, filepath.Join(venv, "bin", "pip"), "install", "./python")
	env = append(env, "TOFUC_BIN="+bin, "TOFUC_REPO="+repo, "TOFUC_CACHE="+filepath.Join(tmp, "cache"))
	run(t, tmp, env, filepath.Join(venv, "bin", "python"), filepath.Join(repo, "python", "tests", "test_tofuc.py"), "-v")
}

// pythonWithNumPy is the first python3 with NumPy and venv: on the
// path, or Debian's (whose packages make test installs).
func pythonWithNumPy() (string, error) {
	var tried []string
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import numpy, venv, ensurepip").Run() == nil {
			return path, nil
		}
		tried = append(tried, path)
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("no python3")
	}
	return "", fmt.Errorf("%s: no NumPy or venv", strings.Join(tried, ", "))
}

// goTool is the go command that runs this test.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// run runs a command in dir with env added, failing the test with its
// output if it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	t.Logf("%s %s: %.1fs", filepath.Base(name), args[0], time.Since(start).Seconds())
}
