// Package report is tofuc's compiler report: one document that a person
// reads to check what the compiler decided, written as text (report.txt),
// JSON (report.json, schema in docs/report.md) and a self-contained HTML
// page (report.html: inline CSS and SVG, no scripts or external assets).
//
// The partition search fills the first sections (summary, baselines,
// operators, tensor tilings, largest contributors) from a plan and its
// cost; later passes append their own Section (graph optimisation,
// kernels) to the same Report rather than writing other reports. Every
// field is deterministic for the same input except the timing fields
// (search_seconds and baseline_details.*.seconds).
package report
