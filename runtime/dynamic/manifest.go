package dynamic

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"tofuc/runtime/plan"
	"tofuc/runtime/safefile"
)

// ManifestFile is the manifest's name in a dynamic plan's folder.
const ManifestFile = "dynamic.json"

// Version is the manifest schema this package reads and writes.
const Version = 1

// maxManifestBytes bounds the manifest Read reads.
const maxManifestBytes = 1 << 20

// Manifest describes a dynamic plan's folder.
type Manifest struct {
	Version int    `json:"version"`
	Model   string `json:"model"`
	// Symbol is the model's batch extent (an attribute or an input
	// extent) the plans differ in.
	Symbol string `json:"symbol"`
	// Sizes are the batch sizes compiled, ascending, each with its plan.
	Sizes []Size `json:"sizes"`
	// Inputs and Outputs are the batch axes of the graph's inputs and
	// outputs, in the plans' order.
	Inputs  []Axis `json:"inputs"`
	Outputs []Axis `json:"outputs"`
	// ParamsFile is the parameters every plan shares.
	ParamsFile *plan.File `json:"params_file,omitempty"`
	// Seal is the SHA-256 of the manifest's JSON without it.
	Seal string `json:"seal,omitempty"`
}

// Size is one compiled batch size: its plan.json, relative to the
// folder, with its length and SHA-256.
type Size struct {
	N    int64     `json:"n"`
	Plan plan.File `json:"plan"`
}

// Axis is where a graph input or output carries the batch: dimension
// Dim, of extent Factor times the batch; Dim is -1 for one without.
type Axis struct {
	Name   string `json:"name"`
	Dim    int    `json:"dim"`
	Factor int64  `json:"factor,omitempty"`
}

// Batched says whether the tensor carries the batch.
func (a Axis) Batched() bool { return a.Dim >= 0 }

// Is reports whether dir holds a dynamic plan.
func Is(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestFile))
	return err == nil
}

// RefuseRanks refuses to run the plan in dir as ranks when it is a
// dynamic one (nil otherwise): its sizes' plans do not run as ranks yet.
func RefuseRanks(dir string) error {
	if Is(dir) {
		return fmt.Errorf("%s was compiled with --dynamic, whose plans do not run as ranks yet", dir)
	}
	return nil
}

// Read reads and checks the manifest of the dynamic plan in dir.
func Read(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := safefile.ReadFile(path, maxManifestBytes)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.Seal != m.seal() {
		return nil, fmt.Errorf("%s was changed after tofuc compile wrote it (its contents do not match its seal): compile the plan again", path)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	if m.Version != Version {
		return fmt.Errorf("manifest version %d, this tofuc reads %d: compile the plan again", m.Version, Version)
	}
	if len(m.Sizes) == 0 {
		return errors.New("no batch size")
	}
	for i, s := range m.Sizes {
		if s.N < 1 || i > 0 && s.N <= m.Sizes[i-1].N {
			return fmt.Errorf("the batch sizes must be positive and ascending, found %d after %d", s.N, m.Sizes[max(i-1, 0)].N)
		}
		if !filepath.IsLocal(s.Plan.Path) {
			return fmt.Errorf("the plan of batch %d, %s, is not inside the folder", s.N, s.Plan.Path)
		}
	}
	if m.ParamsFile != nil && !filepath.IsLocal(m.ParamsFile.Path) {
		return fmt.Errorf("the parameters file %s is not inside the folder", m.ParamsFile.Path)
	}
	for _, a := range slices.Concat(m.Inputs, m.Outputs) {
		if a.Dim < -1 || a.Batched() && a.Factor < 1 {
			return fmt.Errorf("%s: batch axis %d of factor %d", a.Name, a.Dim, a.Factor)
		}
	}
	return nil
}

func (m *Manifest) seal() string {
	q := *m
	q.Seal = ""
	return plan.SealOf(&q)
}

// Write saves the manifest into dir, sealed.
func (m *Manifest) Write(dir string) error {
	m.Version = Version
	m.Seal = m.seal()
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	return safefile.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o644)
}

// Largest is the largest size compiled.
func (m *Manifest) Largest() int64 { return m.Sizes[len(m.Sizes)-1].N }

// Folders are the folders of the plans, relative to the manifest's.
func (m *Manifest) Folders() []string {
	var out []string
	for _, s := range m.Sizes {
		out = append(out, filepath.Dir(s.Plan.Path))
	}
	return out
}

// readPlan reads and checks the plan of size s from dir.
func readPlan(dir string, s Size) (*plan.Plan, error) {
	b, err := s.Plan.Read(dir)
	if err != nil {
		return nil, err
	}
	return plan.Decode(filepath.Join(dir, s.Plan.Path), b)
}
