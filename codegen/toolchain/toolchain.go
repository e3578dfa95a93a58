package toolchain

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Tools are the external programs code generation runs.
type Tools struct {
	LLC         string // llc of LLVM 14
	Opt         string // opt of the same LLVM, beside llc
	LLCVersion  string // its "LLVM version" line
	llcIdentity string // all of `llc --version`, the host CPU included
	CC          string // the host C compiler (links shared objects)
	Cache       *Cache // nil: no caching
}

var (
	findOnce sync.Once
	findMu   sync.Mutex
	found    *Tools
	findErr  error
	cacheEnv string // the $TOFUC_CACHE found's cache is for
)

// Find locates the tools once per process: llc from $TOFUC_LLC, else
// llc-14, else an llc on PATH that reports LLVM 14; the C compiler from
// $CC, else cc or gcc. The cache is DefaultCache(), found again when
// $TOFUC_CACHE has changed since (a test's own cache, or a program that
// sets it after a first compile).
func Find() (*Tools, error) {
	findOnce.Do(func() {
		found, findErr = find()
		cacheEnv = os.Getenv("TOFUC_CACHE")
	})
	if findErr != nil {
		return nil, findErr
	}
	findMu.Lock()
	defer findMu.Unlock()
	if env := os.Getenv("TOFUC_CACHE"); env != cacheEnv {
		t := *found
		var err error
		if t.Cache, err = DefaultCache(); err != nil {
			return nil, err
		}
		found, cacheEnv = &t, env
	}
	return found, nil
}

func find() (*Tools, error) {
	t := &Tools{}
	var err error
	if t.LLC, t.LLCVersion, err = findLLC(); err != nil {
		return nil, err
	}
	id, err := exec.Command(t.LLC, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", t.LLC, err)
	}
	t.llcIdentity = string(id)
	if t.Opt, err = findOpt(t.LLC); err != nil {
		return nil, err
	}
	if t.CC, err = findCC(); err != nil {
		return nil, err
	}
	t.Cache, err = DefaultCache()
	if err != nil {
		return nil, err
	}
	return t, nil
}

var llvmVersion = regexp.MustCompile(`LLVM version (\d+)\.[0-9.]+`)

// findLLC returns the path of llc and its version line.
func findLLC() (string, string, error) {
	var candidates []string
	if p := os.Getenv("TOFUC_LLC"); p != "" {
		candidates = []string{p}
	} else {
		for _, name := range []string{"llc-14", "llc"} {
			if p, err := exec.LookPath(name); err == nil {
				candidates = append(candidates, p)
			}
		}
	}
	if len(candidates) == 0 {
		return "", "", fmt.Errorf("llc of LLVM 14 not found: install Debian's llvm-14 (apt-get install llvm-14) or set TOFUC_LLC")
	}
	var reasons []string
	for _, p := range candidates {
		v, err := LLVMVersion(p)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		if m := llvmVersion.FindStringSubmatch(v); m != nil && m[1] == "14" {
			return p, v, nil
		}
		reasons = append(reasons, fmt.Sprintf("%s reports %q, not LLVM 14 (llir/llvm v0.3.6 writes LLVM 14 IR)", p, v))
	}
	return "", "", fmt.Errorf("no usable llc: %s; install Debian's llvm-14 or set TOFUC_LLC to an LLVM 14 llc", strings.Join(reasons, "; "))
}

// LLVMVersion runs `llc --version` and returns its "LLVM version" line.
func LLVMVersion(llc string) (string, error) {
	out, err := exec.Command(llc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s does not run: %w", llc, err)
	}
	if m := llvmVersion.FindString(string(out)); m != "" {
		return m, nil
	}
	return "", fmt.Errorf("%s --version prints no LLVM version", llc)
}

// findOpt returns the opt beside llc (llc-14 → opt-14), which must be
// of the same LLVM.
func findOpt(llc string) (string, error) {
	dir, base := filepath.Split(llc)
	opt := filepath.Join(dir, strings.Replace(base, "llc", "opt", 1))
	out, err := exec.Command(opt, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("opt of LLVM 14 not found beside %s (%w): install Debian's llvm-14", llc, err)
	}
	if m := llvmVersion.FindStringSubmatch(string(out)); m == nil || m[1] != "14" {
		return "", fmt.Errorf("%s is not LLVM 14's opt", opt)
	}
	return opt, nil
}

func findCC() (string, error) {
	if cc := os.Getenv("CC"); cc != "" {
		if p, err := exec.LookPath(cc); err == nil {
			return p, nil
		}
	}
	for _, name := range []string{"cc", "gcc"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no C compiler found to link host kernels: install Debian's gcc or set CC")
}

// run runs a tool with input on stdin and returns its stdout; on failure
// the error holds its stderr.
func run(ctx context.Context, input []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = msg[:4000] + " ..."
		}
		return nil, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// Identity names the tools as their outputs depend on them: llc's whole
// --version (the host CPU included), opt and the C compiler.
func (t *Tools) Identity() string {
	return strings.Join([]string{t.llcIdentity, t.Opt, t.CC}, "\n")
}

// Target is what llc compiles for.
type Target struct {
	// Opt, when set, are the arguments of an opt run before llc (the
	// middle-end optimisations llc alone lacks: inlining, loop
	// vectorisation).
	Opt  []string
	Args []string // llc arguments besides -filetype and -o
	Obj  bool     // an object file (else assembly, e.g. PTX)
}

// Host compiles position-independent native code for this machine's CPU
// (the host target's and the emulator's recipe). Loops vectorised 8
// wide (AVX2's f32 lanes) also get a vectorised remainder (LLVM 14 does
// so from 16 lanes only): a depthwise convolution's rows of 14 values
// were one vector iteration and six scalar ones, which took most of the
// time (MobileNetV2's 14 × 14 ones: 1.29 against 0.99 ms, 4 launches).
var Host = Target{Opt: []string{"-O3", "-mcpu=native", "-epilogue-vectorization-minimum-VF=8"}, Args: []string{"-O3", "-mcpu=native", "-relocation-model=pic"}, Obj: true}

// Compile runs llc on module text ir for target t, through the cache.
func (t *Tools) Compile(ctx context.Context, ir []byte, target Target) ([]byte, error) {
	args := append([]string{}, target.Args...)
	if target.Obj {
		args = append(args, "-filetype=obj")
	}
	args = append(args, "-o", "-")
	key := Key("llc", t.llcIdentity, strings.Join(target.Opt, " "), strings.Join(args, " "), string(ir))
	return t.Cache.Do(key, func() ([]byte, error) {
		if target.Opt != nil {
			var err error
			if ir, err = run(ctx, ir, t.Opt, append(target.Opt, "-S", "-o", "-")...); err != nil {
				return nil, err
			}
		}
		return run(ctx, ir, t.LLC, args...)
	})
}

// Link links host objects and C sources into a shared library and
// returns its bytes, through the cache.
func (t *Tools) Link(ctx context.Context, objects [][]byte, csources []string) ([]byte, error) {
	parts := []string{"link", t.CC}
	for _, o := range objects {
		parts = append(parts, string(o))
	}
	parts = append(parts, csources...)
	return t.Cache.Do(Key(parts...), func() ([]byte, error) {
		dir, err := os.MkdirTemp("", "tofuc-link-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		args := []string{"-shared", "-fPIC", "-O2", "-o", filepath.Join(dir, "out.so")}
		for i, o := range objects {
			p := filepath.Join(dir, fmt.Sprintf("k%d.o", i))
			if err := os.WriteFile(p, o, 0o644); err != nil {
				return nil, err
			}
			args = append(args, p)
		}
		for i, src := range csources {
			p := filepath.Join(dir, fmt.Sprintf("rt%d.c", i))
			if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
				return nil, err
			}
			args = append(args, p)
		}
		if _, err := run(ctx, nil, t.CC, args...); err != nil {
			return nil, err
		}
		return os.ReadFile(filepath.Join(dir, "out.so"))
	})
}
