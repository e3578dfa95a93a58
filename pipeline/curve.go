package pipeline

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// LossCurveHTML draws a Fit's history as a page a browser shows: the
// training loss of every step (and its running mean over an epoch's
// worth of steps), the held-out loss and accuracy after each epoch.
func LossCurveHTML(h *History, epochs int) []byte {
	const w, ht, left, right, top, bottom = 860.0, 420.0, 60.0, 60.0, 30.0, 50.0
	n := len(h.Losses)
	hi := 0.0
	for _, l := range h.Losses {
		hi = math.Max(hi, l)
	}
	for _, r := range h.Holdout {
		hi = math.Max(hi, r.Loss)
	}
	if hi == 0 || math.IsInf(hi, 0) || math.IsNaN(hi) {
		hi = 1
	}
	x := func(step float64) float64 { return left + (w-left-right)*step/math.Max(float64(n), 1) }
	y := func(loss float64) float64 { return top + (ht-top-bottom)*(1-loss/hi) }
	acc := func(a float64) float64 { return top + (ht-top-bottom)*(1-a) }
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html>\n<meta charset=utf-8>\n<title>tofuc train: loss</title>\n")
	fmt.Fprintf(&b, "<style>body{font:14px sans-serif;margin:20px} text{font:12px sans-serif}</style>\n")
	fmt.Fprintf(&b, "<h1 style=\"font-size:18px\">Training loss, %d steps; held-out loss and accuracy after each of %d epochs</h1>\n", n, len(h.Holdout))
	fmt.Fprintf(&b, "<svg width=%g height=%g viewBox=\"0 0 %g %g\" role=img>\n", w, ht, w, ht)
	fmt.Fprintf(&b, "<rect x=%g y=%g width=%g height=%g fill=none stroke=#999 />\n", left, top, w-left-right, ht-top-bottom)
	for i := 0; i <= 4; i++ {
		v := hi * float64(i) / 4
		fmt.Fprintf(&b, "<text x=%g y=%g text-anchor=end>%.3g</text>\n", left-6, y(v)+4, v)
		fmt.Fprintf(&b, "<text x=%g y=%g>%d%%</text>\n", w-right+6, acc(float64(i)/4)+4, 25*i)
		fmt.Fprintf(&b, "<line x1=%g x2=%g y1=%g y2=%g stroke=#eee />\n", left, w-right, y(v), y(v))
	}
	for i := 0; i <= 4; i++ {
		s := float64(n) * float64(i) / 4
		fmt.Fprintf(&b, "<text x=%g y=%g text-anchor=middle>%.0f</text>\n", x(s), ht-bottom+18, s)
	}
	fmt.Fprintf(&b, "<text x=%g y=%g text-anchor=middle>step</text>\n", (left+w-right)/2, ht-12)
	fmt.Fprintf(&b, "<text x=14 y=%g transform=\"rotate(-90 14 %g)\" text-anchor=middle>loss</text>\n", (top+ht-bottom)/2, (top+ht-bottom)/2)
	fmt.Fprintf(&b, "<text x=%g y=%g transform=\"rotate(90 %g %g)\" text-anchor=middle>held-out accuracy</text>\n", w-14, (top+ht-bottom)/2, w-14, (top+ht-bottom)/2)
	polyline(&b, "#9ecae1", 1, n, func(i int) (float64, float64) { return x(float64(i + 1)), y(h.Losses[i]) })
	window := max(n/max(epochs, 1), 1)
	mean := runningMean(h.Losses, window)
	polyline(&b, "#08519c", 2, n, func(i int) (float64, float64) { return x(float64(i + 1)), y(mean[i]) })
	polyline(&b, "#d94801", 2, len(h.Holdout), func(i int) (float64, float64) { r := h.Holdout[i]; return x(float64(r.Step)), y(r.Loss) })
	if len(h.Holdout) > 0 && h.Holdout[0].Accuracy >= 0 { // a classification's
		polyline(&b, "#238b45", 2, len(h.Holdout), func(i int) (float64, float64) {
			r := h.Holdout[i]
			return x(float64(r.Step)), acc(r.Accuracy)
		})
	}
	for _, r := range h.Holdout {
		fmt.Fprintf(&b, "<circle cx=%g cy=%g r=4 fill=#d94801><title>epoch %d: held-out loss %.4g</title></circle>\n", x(float64(r.Step)), y(r.Loss), r.Epoch, r.Loss)
		if r.Accuracy >= 0 {
			fmt.Fprintf(&b, "<circle cx=%g cy=%g r=4 fill=#238b45><title>epoch %d: held-out accuracy %.1f%%</title></circle>\n", x(float64(r.Step)), acc(r.Accuracy), r.Epoch, 100*r.Accuracy)
		}
	}
	fmt.Fprintf(&b, "</svg>\n<p><span style=\"color:#9ecae1\">&#9632;</span> training loss per step &nbsp; <span style=\"color:#08519c\">&#9632;</span> its running mean over %d steps &nbsp; <span style=\"color:#d94801\">&#9632;</span> held-out loss &nbsp; <span style=\"color:#238b45\">&#9632;</span> held-out accuracy (right axis)</p>\n", window)
	fmt.Fprintf(&b, "<table border=1 cellpadding=4 style=\"border-collapse:collapse\"><tr><th>epoch<th>step<th>held-out loss<th>held-out accuracy</tr>\n")
	for _, r := range h.Holdout {
		a := "n/a"
		if r.Accuracy >= 0 {
			a = fmt.Sprintf("%.2f%%", 100*r.Accuracy)
		}
		fmt.Fprintf(&b, "<tr><td>%d<td>%d<td>%.4g<td>%s</tr>\n", r.Epoch, r.Step, r.Loss, html.EscapeString(a))
	}
	b.WriteString("</table>\n")
	return []byte(b.String())
}

// polyline draws n points as one line.
func polyline(b *strings.Builder, color string, width float64, n int, at func(i int) (x, y float64)) {
	if n == 0 {
		return
	}
	fmt.Fprintf(b, "<polyline fill=none stroke=\"%s\" stroke-width=%g points=\"", color, width)
	for i := range n {
		x, y := at(i)
		fmt.Fprintf(b, "%.1f,%.1f ", x, y)
	}
	b.WriteString("\" />\n")
}

// runningMean is the mean of each value and the window-1 before it.
func runningMean(v []float64, window int) []float64 {
	out := make([]float64, len(v))
	var sum float64
	for i, x := range v {
		sum += x
		if i >= window {
			sum -= v[i-window]
		}
		out[i] = sum / float64(min(i+1, window))
	}
	return out
}
