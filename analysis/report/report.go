package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"tofuc/analysis/cost"
)

// Version is the version of report.json's schema (docs/report.md).
const Version = 2

// Report is the whole compiler report.
type Report struct {
	Version int    `json:"version"`
	Model   string `json:"model"`
	File    string `json:"file"`
	Train   bool   `json:"train"`
	Devices int    `json:"devices"`
	Factors []int  `json:"factors"`
	// SearchSeconds is the partition search alone, wall clock.
	SearchSeconds float64 `json:"search_seconds"`
	// CommBytes is the bytes communicated per step by the chosen plan.
	CommBytes      int64 `json:"comm_bytes"`
	MaxMemoryBytes int64 `json:"max_memory_bytes"`
	// StepSeconds is its simulated step on Topology.
	StepSeconds float64 `json:"step_seconds"`
	// MemoryLimit is --memory (0: none); OverLimitBytes how far the chosen
	// plan is over it (0 when it fits).
	MemoryLimit    int64  `json:"memory_limit_bytes"`
	OverLimitBytes int64  `json:"over_limit_bytes"`
	Exact          bool   `json:"exact"`
	Method         string `json:"method"`
	// Objective is what was minimised: "bytes" or "time"; Chosen the plan
	// kept ("search" or a baseline's key); Bound what the method
	// guarantees, in words.
	Objective string         `json:"objective"`
	Topology  *cost.Topology `json:"topology"`
	Chosen    string         `json:"chosen"`
	Bound     string         `json:"bound"`
	// Search is the search's own plan.
	Search PlanSummary `json:"search"`
	Steps  []Step      `json:"steps"`
	// Baselines holds each baseline's bytes per step under the same cost
	// model: data_parallel, allrow_greedy, spartan, equal_chop, icml18.
	Baselines       map[string]int64          `json:"baselines"`
	BaselineDetails map[string]BaselineDetail `json:"baseline_details"`
	// MemoryTradeOff is the best plan found at a few memory limits.
	MemoryTradeOff []TradeOffRow `json:"memory_tradeoff"`
	// MCMC is the step-time refinement (objective time only).
	MCMC         *MCMC         `json:"mcmc,omitempty"`
	Ops          []Op          `json:"ops"`
	Tensors      []Tensor      `json:"tensors"`
	Contributors []Contributor `json:"contributors"`
	// Checked is the plan given with --strategy, priced beside the optimum.
	Checked *Checked `json:"checked,omitempty"`
	// Plan is the chosen plan, in the form --strategy reads.
	Plan Plan `json:"plan"`
	// Pipelines are the pipeline plans (tofuc partition --pipeline).
	Pipelines *Pipelines `json:"pipelines,omitempty"`
	// Sections are added by later passes.
	Sections []Section `json:"sections"`
}

// Step is one recursion step of the search.
type Step struct {
	Workers      int    `json:"workers"`
	Bytes        int64  `json:"bytes"`
	Method       string `json:"method"`
	Variables    int    `json:"variables"`
	LargestTable int64  `json:"largest_table"`
}

// BaselineDetail is what a baseline's plan costs beyond its bytes.
type BaselineDetail struct {
	CommBytes      int64   `json:"comm_bytes"`
	MaxMemoryBytes int64   `json:"max_memory_bytes"`
	StepSeconds    float64 `json:"step_seconds"`
	OverMemory     bool    `json:"over_memory"`
	Ratio          float64 `json:"ratio"`      // tofuc's bytes over the baseline's
	TimeRatio      float64 `json:"time_ratio"` // tofuc's step time over the baseline's
	Seconds        float64 `json:"seconds"`
}

// PlanSummary is one plan's figures.
type PlanSummary struct {
	CommBytes      int64   `json:"comm_bytes"`
	MaxMemoryBytes int64   `json:"max_memory_bytes"`
	StepSeconds    float64 `json:"step_seconds"`
	Exact          bool    `json:"exact"`
	Method         string  `json:"method"`
	Memory         string  `json:"memory"` // how a memory limit shaped it ("": it did not)
}

// TradeOffRow is the best plan found within a memory limit (Plan "" and
// zero figures when none fits).
type TradeOffRow struct {
	LimitBytes     int64   `json:"limit_bytes"`
	Plan           string  `json:"plan"`
	CommBytes      int64   `json:"comm_bytes"`
	MaxMemoryBytes int64   `json:"max_memory_bytes"`
	StepSeconds    float64 `json:"step_seconds"`
}

// MCMC is the step-time refinement.
type MCMC struct {
	Seed          uint64  `json:"seed"`
	Steps         int     `json:"steps"`
	Accepted      int     `json:"accepted"`
	BeforeSeconds float64 `json:"before_seconds"`
	AfterSeconds  float64 `json:"after_seconds"`
}

// Op is one operator row.
type Op struct {
	Name     string   `json:"name"`
	Op       string   `json:"op"`
	Role     string   `json:"role"`
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Origin   string   `json:"origin,omitempty"` // an imported model's node it converts (ir.Node.Origin)
	Group    int      `json:"group"`
	Inputs   []string `json:"inputs"`
	Outputs  []string `json:"outputs"`
	Strategy []string `json:"strategy"` // per step, in words
	Bytes    int64    `json:"bytes"`
}

// At is where the operator comes from: the ONNX node it converts, in an
// imported model, else its file and line.
func (o Op) At() string {
	if o.Origin != "" {
		return o.Origin
	}
	return fmt.Sprintf("%s:%d", o.File, o.Line)
}

// Tensor is one tensor with its tiling.
type Tensor struct {
	Name   string  `json:"name"`
	Kind   string  `json:"kind"` // input, parameter, activation, gradient
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Splits []int   `json:"splits"` // dimension per step, -1 replicated
	Tile   []int64 `json:"tile"`
	Bytes  int64   `json:"bytes"`
	// Repeat folds consecutive tensors of the same kind, shape and
	// tiling into the first (×Repeat); they follow it in Tensors.
	Repeat int `json:"repeat"`
}

// Contributor is one of the operators communicating most, with why.
type Contributor struct {
	Op    string  `json:"op"`
	Bytes int64   `json:"bytes"`
	Share float64 `json:"share"`
	Why   string  `json:"why"`
}

// Checked is a user's plan beside the optimum.
type Checked struct {
	File           string `json:"file"`
	CommBytes      int64  `json:"comm_bytes"`
	MaxMemoryBytes int64  `json:"max_memory_bytes"`
	OptimumBytes   int64  `json:"optimum_bytes"`
	// Worse lists the operators whose bytes exceed the optimum's most.
	Worse []Contributor `json:"worse"`
}

// Plan is a partition plan by tensor and operator names.
type Plan struct {
	Factors []int               `json:"factors"`
	Tensors map[string][]int    `json:"tensors"`
	Ops     map[string][]string `json:"ops"`
}

// Section is a later pass's part of the report: a title, lines of text
// for report.txt and report.html, and its data for report.json.
type Section struct {
	Name  string   `json:"name"`
	Title string   `json:"title"`
	Lines []string `json:"lines"`
	Data  any      `json:"data,omitempty"`
}

// Read reads the report.json in dir, so that a later pass can add its
// section to it.
func Read(dir string) (*Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "report.json"), err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("%s: report version %d, this tofuc writes %d", filepath.Join(dir, "report.json"), r.Version, Version)
	}
	return &r, nil
}

// SetSection replaces the section of the same name, or appends s.
func (r *Report) SetSection(s Section) {
	for i := range r.Sections {
		if r.Sections[i].Name == s.Name {
			r.Sections[i] = s
			return
		}
	}
	r.Sections = append(r.Sections, s)
}

// Partitioned reports whether the report holds a partition (a report that
// only later passes wrote has none, and shows only their sections).
func (r *Report) Partitioned() bool { return r.Devices > 0 }
