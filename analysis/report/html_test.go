package report_test

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"tofuc/internal/examplegraph"

	"tofuc/analysis/partition"
	"tofuc/analysis/report"
)

// mlpReport builds the report of the MLP's training graph on 4 devices.
func mlpReport(t *testing.T) *report.Report {
	t.Helper()
	cg := examplegraph.Load(t, "mlp", true, nil)
	in := &report.Input{Model: "mlp", File: "examples/mlp.tdl", Train: true, Graph: cg, Coarse: partition.Coarsen(cg)}
	var err error
	if in.Outcome, err = partition.Run(cg, 4, partition.Options{}, true); err != nil {
		t.Fatal(err)
	}
	return report.Partition(in)
}

// TestReportDeterministic: two reports of the same input differ only in
// their timing fields, and report.json has the required fields.
func TestReportDeterministic(t *testing.T) {
	a, b := mlpReport(t), mlpReport(t)
	for _, r := range []*report.Report{a, b} {
		r.SearchSeconds = 0
		for k, d := range r.BaselineDetails {
			d.Seconds = 0
			r.BaselineDetails[k] = d
		}
	}
	var ja, jb bytes.Buffer
	if err := a.JSON(&ja); err != nil {
		t.Fatal(err)
	}
	b.JSON(&jb)
	if ja.String() != jb.String() {
		t.Fatal("two runs give different report.json beyond timing fields")
	}
	for _, field := range []string{`"version": 2`, `"devices": 4`, `"search_seconds"`, `"comm_bytes"`, `"max_memory_bytes"`,
		`"step_seconds"`, `"memory_tradeoff"`, `"topology"`, `"objective": "time"`, `"chosen"`, `"bound"`,
		`"data_parallel"`, `"allrow_greedy"`, `"spartan"`, `"equal_chop"`, `"icml18"`, `"baseline_details"`} {
		if !strings.Contains(ja.String(), field) {
			t.Errorf("report.json lacks %s", field)
		}
	}
	if len(a.Baselines) != len(partition.Baselines) {
		t.Errorf("baselines has %d keys, want %d", len(a.Baselines), len(partition.Baselines))
	}
}

// TestReportHTMLInChromium opens report.html in headless Chromium: no
// console errors, and the screenshot shows the coloured tiles.
func TestReportHTMLInChromium(t *testing.T) {
	browser := findChromium()
	if browser == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (make test installs Debian's chromium)")
		}
		t.Skip("chromium is not installed; make test installs it")
	}
	if n := screenshotColours(t, browser, mlpReport(t)); n < 2000 {
		t.Errorf("the screenshot has %d strongly coloured pixels; the tiling pictures are not drawn", n)
	}
}

// screenshotColours writes r and counts the strongly coloured pixels of
// Chromium's screenshot of report.html, failing on console errors.
func screenshotColours(t *testing.T, browser string, r *report.Report) int {
	t.Helper()
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--enable-logging=stderr", "--v=0", "--window-size=1200,6000", "--screenshot="+shot, "file://"+filepath.Join(dir, "report.html"))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			t.Errorf("console: %s", line)
		}
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return colourful(img)
}

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// colourful counts pixels of the tiles' colours: saturated, neither dark
// nor pale (the rest of the page is black, white, grey and link blue).
func colourful(img image.Image) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			hi, lo := max(r, g, bl), min(r, g, bl)
			if lo > 40<<8 && hi < 240<<8 && (hi-lo)*100/hi > 30 {
				n++
			}
		}
	}
	return n
}

// TestReportHTMLFitsTheWindow: however long its names and strategies, the
// page does not scroll sideways in a 1200-pixel window (Wide ResNet-152's
// tensor names did), its steps count from 1 as in report.txt, and its
// links to the sources resolve from the report's folder.
func TestReportHTMLFitsTheWindow(t *testing.T) {
	browser := findChromium()
	if browser == "" {
		t.Skip("chromium is not installed; make test installs it")
	}
	r := mlpReport(t)
	long := strings.Repeat("layer4.block35/conv2_", 12)
	r.Tensors[0].Name = long
	r.Ops[0].Name, r.Ops[0].Strategy[0] = long, strings.Repeat("split n (rows of x)|", 20)
	r.Contributors[0].Why = long
	dir := filepath.Join(t.TempDir(), "deep", "report")
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<h2 id=\"steps\">Recursion steps</h2>\n<table><tr><th>step</th><th>workers</th><th>bytes</th><th>method</th><th>largest table</th></tr>\n<tr><td>1</td>") || strings.Contains(string(html), "<tr><td>0</td>") {
		t.Error("the recursion steps are not numbered from 1")
	}
	// The links are relative to the report's folder (the report names the
	// file relative to the working directory, here this package's).
	if href := regexp.MustCompile(`href="([^"]+)"`).FindStringSubmatch(string(html)); href == nil {
		t.Error("no link to the model's source")
	} else if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(href[1]))); err != nil {
		t.Errorf("the link %s does not resolve from the report's folder: %v", href[1], err)
	}
	// Chromium lays the page out at 1200 pixels and writes the page's
	// scroll width into its title.
	measured := filepath.Join(dir, "measured.html")
	script := `<script>document.title = "width " + document.documentElement.scrollWidth</script></body>`
	os.WriteFile(measured, []byte(strings.Replace(string(html), "</body>", script, 1)), 0o644)
	out, err := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600", "--dump-dom", "file://"+measured).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`<title>width (\d+)</title>`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no width measured:\n%.2000s", out)
	}
	if w, _ := strconv.Atoi(m[1]); w > 1200 {
		t.Errorf("the page is %d pixels wide in a 1200-pixel window", w)
	}
}
