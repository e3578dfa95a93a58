package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"tofuc/lang"
)

// maxPictures bounds the tiling pictures of report.html.
const maxPictures = 400

// HTML writes report.html: one self-contained page, inline CSS and SVG.
// dir is where the page will be: its links to the operators' source files
// are relative to it.
func (r *Report) HTML(w io.Writer, dir string) error {
	var summary bytes.Buffer
	r.Summary(&summary)
	data := struct {
		R        *Report
		Summary  string
		Pictures []picture
		More     int
		Links    map[string]string
	}{R: r, Summary: summary.String(), Links: sourceLinks(r.Ops, dir)}
	for _, t := range r.Tensors {
		if t.Repeat == 0 || t.Kind == "gradient" {
			continue
		}
		if len(data.Pictures) == maxPictures {
			data.More++
			continue
		}
		data.Pictures = append(data.Pictures, tiling(t, r.Factors))
	}
	return page.Execute(w, data)
}

// sourceLinks maps each operator's .tdl file that exists on disk to its
// path relative to dir, as a URL path; the standard library's files are
// embedded in tofuc, so they get no link.
func sourceLinks(ops []Op, dir string) map[string]string {
	links := map[string]string{}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return links
	}
	for _, op := range ops {
		if _, done := links[op.File]; done || filepath.Ext(op.File) != ".tdl" {
			continue
		}
		links[op.File] = ""
		abs, err := filepath.Abs(op.File)
		if _, statErr := os.Stat(abs); err != nil || statErr != nil {
			continue
		}
		if rel, err := filepath.Rel(absDir, abs); err == nil {
			links[op.File] = (&url.URL{Path: filepath.ToSlash(rel)}).String()
		}
	}
	return links
}

// picture is one tensor's tiling as an SVG.
type picture struct {
	Name, Caption string
	SVG           template.HTML
}

// tiling draws a tensor's tiles coloured by device (Tofu's Figure 3.11):
// splits along dimension 0 cut rows, along other dimensions columns.
func tiling(t Tensor, factors []int) picture {
	rows, cols := 1, 1
	for i, d := range t.Splits {
		switch {
		case d == 0:
			rows *= factors[i]
		case d > 0:
			cols *= factors[i]
		}
	}
	const w, h = 160, 96
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="tiling" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`, w, h, w, h)
	devices := 1
	for _, k := range factors {
		devices *= k
	}
	tw, th := float64(w)/float64(cols), float64(h)/float64(rows)
	for r := range rows {
		for c := range cols {
			dev := device(t.Splits, factors, r, c)
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="hsl(%d,65%%,60%%)" stroke="#333" stroke-width="0.5"><title>device %d</title></rect>`,
				float64(c)*tw, float64(r)*th, tw, th, 360*dev/devices, dev)
		}
	}
	b.WriteString(`</svg>`)
	caption := fmt.Sprintf("%s %v: %s", t.Kind, t.Shape, splitWords(t.Splits))
	name := t.Name
	if t.Repeat > 1 {
		name += fmt.Sprintf(" ×%d", t.Repeat)
	}
	return picture{Name: name, Caption: caption, SVG: template.HTML(b.String())}
}

// device owns the tile at (row, col): the split index of each step taken
// from the row or column index, most significant first; replicated steps
// show the first worker.
func device(splits, factors []int, row, col int) int {
	dev := 0
	for i, d := range splits {
		stride := 1
		for _, k := range factors[i+1:] {
			stride *= k
		}
		if d < 0 {
			continue
		}
		inner := 1 // the extent of later steps on the same axis
		for j := i + 1; j < len(splits); j++ {
			if (splits[j] == 0) == (d == 0) && splits[j] >= 0 {
				inner *= factors[j]
			}
		}
		idx := col
		if d == 0 {
			idx = row
		}
		dev += (idx / inner % factors[i]) * stride
	}
	return dev
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"bytes":   lang.FormatBytes,
	"seconds": Seconds,
	"inc":     func(i int) int { return i + 1 },
	"join":    strings.Join,
	"ints":    func(xs []int) string { return joinInts(xs, ", ") },
	"pct":     func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tofuc report: {{.R.Model}}</title>
<style>
body{font-family:sans-serif;margin:1.5em;color:#222}
pre{background:#f4f4f4;padding:.8em;white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;overflow-wrap:anywhere}
.tiles{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0;font-size:12px;width:170px;overflow-wrap:anywhere}
.timeline{overflow-x:auto;max-width:100%}
</style></head><body>
<h1>tofuc report: {{.R.Model}}</h1>
{{if .R.Partitioned}}<h2 id="summary">Summary</h2>
<pre>{{.Summary}}</pre>
<p>Bound: {{.R.Bound}}.</p>
{{if .R.MemoryTradeOff}}<h2 id="tradeoff">Memory trade-off</h2>
<table><tr><th>memory limit</th><th>bytes per step</th><th>memory per device</th><th>step time</th><th>plan</th></tr>
{{range .R.MemoryTradeOff}}<tr><td>{{bytes .LimitBytes}}</td>{{if .Plan}}<td>{{bytes .CommBytes}}</td><td>{{bytes .MaxMemoryBytes}}</td><td>{{seconds .StepSeconds}}</td><td>{{.Plan}}</td>{{else}}<td colspan="4">none fits</td>{{end}}</tr>
{{end}}</table>{{end}}
{{with .R.Pipelines}}<h2 id="pipelines">Pipeline plans</h2>
{{if .Error}}<p>None: {{.Error}}</p>{{else}}<p>Simulated: {{.Layers}} layers, batch {{.Batch}}. {{if .Asked}}The first plan is chosen, as <code>tofuc compile --pipeline=always</code> asks.{{else if .Chosen}}The first plan is faster than the operator-partitioned plan and is chosen (<code>tofuc compile --pipeline</code> runs it).{{else}}The operator-partitioned plan stays chosen.{{end}} Forward passes blue, backward orange, all-reduce and updates green; a row per stage.</p>
{{range .Plans}}<h3>{{.Method}} ({{.Structure}}): {{seconds .StepSeconds}} a step, bubble {{pct .Bubble}}</h3>
<div class="timeline">{{.Timeline}}</div>
<table><tr><th>stage</th><th>layers</th><th>devices</th><th>micro-batches × samples</th><th>forward</th><th>backward</th><th>all-reduce, updates</th><th>a sample</th><th>in flight</th><th>memory a device</th><th>feeds</th></tr>
{{range $i, $s := .Stages}}<tr><td>{{$i}}</td><td>{{join $s.Layers ", "}}</td><td>{{ints $s.Devices}}</td><td>{{$s.MicroBatches}} × {{$s.MicroBatch}}</td><td>{{seconds $s.ForwardSeconds}}</td><td>{{seconds $s.BackwardSeconds}}</td><td>{{seconds $s.SyncSeconds}}</td><td>{{seconds $s.TimePerSample}}</td><td>{{$s.InFlight}}</td><td>{{bytes $s.MemoryBytes}}</td><td>{{ints $s.Next}}</td></tr>
{{end}}</table>{{end}}{{end}}{{end}}
<h2 id="steps">Recursion steps</h2>
<table><tr><th>step</th><th>workers</th><th>bytes</th><th>method</th><th>largest table</th></tr>
{{range $i, $s := .R.Steps}}<tr><td>{{inc $i}}</td><td>{{$s.Workers}}</td><td>{{bytes $s.Bytes}}</td><td>{{$s.Method}}</td><td>{{$s.LargestTable}}</td></tr>
{{end}}</table>
{{with .R.Checked}}<h2 id="checked">Your plan</h2>
<p>{{.File}}: {{bytes .CommBytes}} per step ({{bytes .MaxMemoryBytes}} per device); the chosen plan communicates {{bytes .OptimumBytes}}.</p>
<table><tr><th>operator</th><th>extra bytes</th><th>strategies</th></tr>
{{range .Worse}}<tr><td>{{.Op}}</td><td>{{bytes .Bytes}}</td><td>{{.Why}}</td></tr>
{{end}}</table>{{end}}
<h2 id="contributors">Largest communication</h2>
<table><tr><th>operator</th><th>bytes</th><th>share</th><th>why</th></tr>
{{range .R.Contributors}}<tr><td>{{.Op}}</td><td>{{bytes .Bytes}}</td><td>{{pct .Share}}</td><td>{{.Why}}</td></tr>
{{end}}</table>
<h2 id="tilings">Tensor tilings</h2>
<p>Tiles coloured by device; splits along dimension 0 cut rows, along other dimensions columns; ×N folds N consecutive tensors tiled alike.</p>
<div class="tiles">{{range .Pictures}}<figure>{{.SVG}}<figcaption><b>{{.Name}}</b><br>{{.Caption}}</figcaption></figure>
{{end}}</div>{{if .More}}<p>{{.More}} more tensors are listed in report.txt and report.json.</p>{{end}}
<h2 id="operators">Operators</h2>
<table><tr><th>name</th><th>op</th><th>at</th><th>inputs → outputs</th><th>strategy per step</th><th>bytes</th></tr>
{{range .R.Ops}}<tr><td>{{.Name}}</td><td>{{.Op}}</td><td>{{with index $.Links .File}}<a href="{{.}}">{{end}}{{.At}}{{if index $.Links .File}}</a>{{end}}</td><td>{{join .Inputs ", "}} → {{join .Outputs ", "}}</td><td>{{join .Strategy " | "}}</td><td>{{bytes .Bytes}}</td></tr>
{{end}}</table>
{{else}}<p>{{.R.File}}: not partitioned.</p>
{{end}}{{range .R.Sections}}<h2 id="{{.Name}}">{{.Title}}</h2><pre>{{join .Lines "\n"}}</pre>
{{end}}</body></html>
`))
