package pipeline

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"tofuc/codegen"
	"tofuc/codegen/blocking"
	"tofuc/codegen/mathir"
	"tofuc/codegen/toolchain"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
)

// A compile whose inputs have not changed reuses what the last one
// wrote. The key hashes everything the outputs depend on:
//   - tofuc's own executable, which holds the standard library and every
//     pass;
//   - the toolchain's identity (llc's version and the host CPU it
//     targets);
//   - the choices the emitted code makes from the CPU features Go
//     detects (blocking.HostChoices: vector width, register tile; and
//     whether the host has FMA), which GODEBUG=cpu.avx512f=off or
//     cpu.fma=off changes on the same CPU;
//   - the model's Source (its files, weights, name and attributes);
//   - the options, but for Jobs and Progress.
//
// An entry, kept in the toolchain's disk cache (which checks each
// entry's SHA-256 when it reads it), is a tar of a manifest
// (manifestName) and of every file the compile wrote, nothing else: the
// manifest lists each file's length and SHA-256, checked again when the
// entry is unpacked. A damaged entry is discarded with one line on
// toolchain.Warnings, and the model compiled again.

// manifestName is the tar member holding an entry's manifest.
const manifestName = ".manifest.json"

// manifest describes a cache entry.
type manifest struct {
	Files []fileEntry   `json:"files"`
	Stats codegen.Stats `json:"stats"`
}

type fileEntry struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	Mode   uint32 `json:"mode"`
}

// cached runs compile (which writes into dir) unless an earlier compile
// with the same key left its outputs in the cache, which are then
// unpacked into dir.
func cached(m *Model, dir string, opts Options, compile func() (*Result, error)) (*Result, error) {
	tools, err := toolchain.Find()
	if err != nil {
		return nil, err
	}
	if m.Source == "" || tools.Cache == nil {
		return compile()
	}
	key, err := compileKey(m, opts, tools)
	if err != nil {
		return nil, err
	}
	blob, found, err := tools.Cache.Get(key)
	if found {
		res, damage := unpack(blob, dir)
		if damage == nil {
			res.Cached = true
			return res, nil
		}
		os.Remove(tools.Cache.Path(key))
		if err := clearDir(dir); err != nil {
			return nil, err
		}
		toolchain.Warn("the compile cache's entry %s is damaged (%v): removed; compiling again", tools.Cache.Path(key), damage)
	} else if err != nil {
		toolchain.Warn("%v; compiling again", err)
	}
	res, err := compile()
	if err != nil {
		return nil, err
	}
	if blob, err := pack(dir, res.Stats); err == nil {
		tools.Cache.Put(key, blob) // a cache that cannot be written is skipped
	}
	return res, nil
}

// compileKey hashes the inputs of a compile (see above).
func compileKey(m *Model, opts Options, tools *toolchain.Tools) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if err := hashFile(h, exe); err != nil {
		return "", err
	}
	opts.Jobs, opts.Progress = 0, nil
	o, err := json.Marshal(opts)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s\n%s fma %v\n%s\n%s\n", tools.Identity(), blocking.HostChoices(), mathir.HostHasFMA(), m.Source, o)
	return "compile-" + hex.EncodeToString(h.Sum(nil)), nil
}

// pack is a cache entry of the files under dir.
func pack(dir string, stats codegen.Stats) ([]byte, error) {
	man := manifest{Stats: stats}
	var files [][]byte
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
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
		sum := sha256.Sum256(data)
		man.Files = append(man.Files, fileEntry{Path: filepath.ToSlash(rel), Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Mode: uint32(info.Mode().Perm())})
		files = append(files, data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	add := func(name string, data []byte, mode int64) error {
		if err := w.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := w.Write(data)
		return err
	}
	mj, err := json.Marshal(man)
	if err != nil {
		return nil, err
	}
	if err := add(manifestName, mj, 0o644); err != nil {
		return nil, err
	}
	for i, f := range man.Files {
		if err := add(f.Path, files[i], int64(f.Mode)); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// unpack checks a cache entry against its manifest and writes its files
// under dir (which is empty): the result has the plan, the parameters
// and the statistics of the compile that made the entry.
func unpack(blob []byte, dir string) (*Result, error) {
	r := tar.NewReader(bytes.NewReader(blob))
	hdr, err := r.Next()
	if err != nil || hdr.Name != manifestName {
		return nil, fmt.Errorf("no manifest")
	}
	var man manifest
	if err := json.NewDecoder(r).Decode(&man); err != nil {
		return nil, fmt.Errorf("the manifest: %w", err)
	}
	for _, f := range man.Files {
		hdr, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		sum := sha256.Sum256(data)
		name := filepath.FromSlash(f.Path)
		switch {
		case hdr.Name != f.Path || int64(len(data)) != f.Bytes:
			return nil, fmt.Errorf("%s: %d bytes of %s, the manifest says %d bytes of %s", f.Path, len(data), hdr.Name, f.Bytes, f.Path)
		case hex.EncodeToString(sum[:]) != f.SHA256:
			return nil, fmt.Errorf("%s: its SHA-256 is not the manifest's", f.Path)
		case !filepath.IsLocal(name):
			return nil, fmt.Errorf("a file outside the output folder: %s", f.Path)
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, fs.FileMode(f.Mode)&fs.ModePerm); err != nil {
			return nil, err
		}
	}
	if _, err := r.Next(); err != io.EOF {
		return nil, fmt.Errorf("members beyond the manifest's")
	}
	p, err := plan.Read(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, err
	}
	res := &Result{Plan: p, Dir: dir, Stats: man.Stats}
	res.Params, err = npy.ReadNPZ(filepath.Join(dir, "params.npz"))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return res, err
}

// clearDir removes everything in dir.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
