package report_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"tofuc/analysis/cost"
	"tofuc/analysis/report"
	"tofuc/analysis/stages"
	"tofuc/internal/examplegraph"
)

// withPipelines adds the pipeline plans of the MLP's training graph on
// 4 devices over PCIe to r.
func withPipelines(t *testing.T, r *report.Report) *report.Report {
	t.Helper()
	topo := cost.Topologies["pcie"]
	ls, err := stages.NewLayers(examplegraph.Load(t, "mlp", true, nil), topo.Roofline(0))
	if err != nil {
		t.Fatal(err)
	}
	var plans []*stages.Plan
	for _, method := range []string{stages.GraphPipe, stages.Sequential} {
		p, err := stages.Search(ls, method, stages.Options{Topology: topo, Devices: 4})
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	r.Pipelines = report.NewPipelines(ls, plans...)
	return r
}

// TestPipelineTimeline: report.html draws each pipeline plan's schedule,
// one rectangle per pass and per stage's all-reduce, each pass where
// the simulation put it; Chromium shows it (the screenshot gains the
// timeline's colours) with no console errors.
func TestPipelineTimeline(t *testing.T) {
	r := withPipelines(t, mlpReport(t))
	var html bytes.Buffer
	if err := r.HTML(&html, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	svgs := regexp.MustCompile(`(?s)<div class="timeline"><svg.*?</svg>`).FindAllString(html.String(), -1)
	if len(svgs) != len(r.Pipelines.Plans) {
		t.Fatalf("%d timelines for %d plans", len(svgs), len(r.Pipelines.Plans))
	}
	for i, pl := range r.Pipelines.Plans {
		want := 0
		for _, s := range pl.Stages {
			if len(s.Schedule) != 2*s.MicroBatches {
				t.Errorf("%s: a stage runs %d passes, not %d", pl.Method, len(s.Schedule), 2*s.MicroBatches)
			}
			want += len(s.Schedule)
			if s.SyncSeconds > 0 {
				want++
			}
		}
		if got := strings.Count(svgs[i], "<rect"); got != want {
			t.Errorf("%s: %d rectangles, want %d", pl.Method, got, want)
		}
		for j, s := range pl.Stages {
			if end := s.Schedule[len(s.Schedule)-1].End + s.SyncSeconds; end > pl.StepSeconds*(1+1e-12) {
				t.Errorf("%s: stage %d ends at %g s, after the step's %g s", pl.Method, j, end, pl.StepSeconds)
			}
		}
	}
	browser := findChromium()
	if browser == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (make test installs Debian's chromium)")
		}
		t.Skip("chromium is not installed; make test installs it")
	}
	with, without := screenshotColours(t, browser, r), screenshotColours(t, browser, mlpReport(t))
	if with-without < 5000 {
		t.Errorf("the timeline adds %d coloured pixels (%d with, %d without): not drawn", with-without, with, without)
	}
}
