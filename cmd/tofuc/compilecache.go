package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"tofuc/analysis/check"
	"tofuc/codegen/blocking"
	"tofuc/codegen/mathir"
	"tofuc/codegen/toolchain"
)

// A compile whose inputs have not changed reuses what the last one wrote.
// The key hashes everything the outputs depend on:
//   - tofuc's own executable, which holds the standard library and every pass;
//   - the toolchain's identity (llc's version and the host CPU it targets);
//   - the choices the emitted code makes from the CPU features Go detects
//     (hostChoices: vector width, register tile, FMA), which
//     GODEBUG=cpu.avx512f=off or cpu.fma=off changes on the same CPU;
//   - the flags other than -o and --jobs;
//   - the model file, every file it imports, and the weights beside it.
// The entry, kept in the toolchain's disk cache, is a tar of every file
// the compile wrote into DIR plus what it printed.

// stdoutEntry is the tar member holding the compile's standard output,
// in which dirMark stands for the output folder.
const (
	stdoutEntry = ".stdout"
	dirMark     = "\x00DIR\x00"
)

// cachedCompile runs compile (which writes f.out and prints to its
// writer) unless an earlier run with the same key left its outputs in
// the cache, in which case they are written into f.out again.
func cachedCompile(path string, f compileFlags, stdout io.Writer, compile func(io.Writer) error) error {
	tools, err := toolchain.Find()
	if err != nil {
		return err
	}
	key, err := compileKey(path, f, tools)
	if err != nil || tools.Cache == nil {
		return compile(stdout) // no key or no cache: compile every time
	}
	ran := false
	blob, err := tools.Cache.Do(key, func() ([]byte, error) {
		ran = true
		var out bytes.Buffer
		if err := compile(io.MultiWriter(stdout, &out)); err != nil {
			return nil, err
		}
		return packDir(f.out, bytes.ReplaceAll(out.Bytes(), []byte(f.out), []byte(dirMark)))
	})
	if err != nil || ran {
		return err
	}
	printed, err := unpackDir(blob, f.out)
	if err != nil {
		return fmt.Errorf("the compile cache's entry %s: %v (remove it, or set TOFUC_CACHE=off)", key[:12], err)
	}
	stdout.Write(bytes.ReplaceAll(printed, []byte(dirMark), []byte(f.out)))
	fmt.Fprintf(stdout, "(unchanged since the last compile: its outputs reused from the compile cache)\n")
	return nil
}

// hostChoices names every choice the emitted code makes from the CPU
// features Go detects: the blocking's (vector width, the GEMM's
// register tile and narrow columns) and whether llvm.fma.f64 is the
// CPU's instruction.
func hostChoices() string {
	return fmt.Sprintf("%s fma %v", blocking.HostChoices(), mathir.HostHasFMA())
}

// compileKey hashes the inputs of a compile (see above).
func compileKey(path string, f compileFlags, tools *toolchain.Tools) (string, error) {
	h := sha256.New()
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if err := hashFile(h, exe); err != nil {
		return "", err
	}
	f.out, f.jobs = "", 0
	fmt.Fprintf(h, "%s\n%+v\n%s\n", tools.Identity(), f, hostChoices())
	if filepath.Ext(path) == ".onnx" { // weights and all
		if err := hashFile(h, path); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	prog, err := check.NewProgram()
	if err != nil {
		return "", err
	}
	if _, err := prog.Load(path); err != nil {
		return "", err
	}
	paths, srcs := prog.Sources()
	for i := range paths {
		fmt.Fprintf(h, "%s %d\n", paths[i], len(srcs[i]))
		h.Write(srcs[i])
	}
	weights := strings.TrimSuffix(path, filepath.Ext(path)) + ".npz"
	if err := hashFile(h, weights); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, path string) error {
	r, err := os.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Fprintf(h, "%s\n", filepath.Base(path))
	_, err = io.Copy(h, r)
	return err
}

// packDir is a tar of the regular files under dir and of printed.
func packDir(dir string, printed []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	add := func(name string, data []byte, mode int64) error {
		if err := w.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := w.Write(data)
		return err
	}
	if err := add(stdoutEntry, printed, 0o644); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return add(filepath.ToSlash(rel), data, int64(info.Mode().Perm()))
	})
	if err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// unpackDir writes the files of a packDir tar under dir and returns what
// the compile printed.
func unpackDir(blob []byte, dir string) ([]byte, error) {
	r := tar.NewReader(bytes.NewReader(blob))
	var printed []byte
	for {
		hdr, err := r.Next()
		if err == io.EOF {
			return printed, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		if hdr.Name == stdoutEntry {
			printed = data
			continue
		}
		name := filepath.FromSlash(hdr.Name)
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("a file outside the output folder: %s", hdr.Name)
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, fs.FileMode(hdr.Mode)&fs.ModePerm); err != nil {
			return nil, err
		}
	}
}
