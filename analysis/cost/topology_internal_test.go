package cost

import (
	"slices"
	"strings"
	"testing"
)

// TestStepLinks: on machines of eight GPUs, a step with a group that
// spans machines goes at InfiniBand's speed and latency, one whose
// groups all stay inside a machine at NVLink's; a plan larger than the
// topology is refused.
func TestStepLinks(t *testing.T) {
	const ib, nvlink = 50e9, 450e9
	for _, c := range []struct {
		topology string
		factors  []int
		want     []float64 // each step's bandwidth
	}{
		{"h100-2x8-ib", []int{2, 8}, []float64{ib, nvlink}},
		{"h100-2x8-ib", []int{8, 2}, []float64{ib, nvlink}},
		{"h100-2x8-ib", []int{4, 4}, []float64{ib, nvlink}},
		{"h100-2x8-ib", []int{2, 2, 2, 2}, []float64{ib, nvlink, nvlink, nvlink}},
		{"h100-2x8-ib", []int{2, 4}, []float64{nvlink, nvlink}}, // 8 devices: one machine
		{"h100-4x8-ib", []int{4, 8}, []float64{ib, nvlink}},
		{"h100-4x8-ib", []int{2, 16}, []float64{ib, ib}},
		{"h100-4x8-ib", []int{32}, []float64{ib}},
		{"h100-nvlink", []int{2, 2, 2}, []float64{nvlink, nvlink, nvlink}},
		// Groups that straddle the machines: {2, 5, 8} at the first
		// step, {6, 7, 8} at the second (device 0's own are inside one).
		{"h100-2x8-ib", []int{3, 3}, []float64{ib, ib}},
		{"h100-2x8-ib", []int{4, 3}, []float64{ib, ib}},
	} {
		_, links, err := Topologies[c.topology].stepLinks(c.factors)
		if err != nil {
			t.Fatalf("%s %v: %v", c.topology, c.factors, err)
		}
		var got []float64
		for i, l := range links {
			got = append(got, l.Bandwidth)
			if wantLatency := map[float64]float64{ib: 5e-6, nvlink: 2e-6}[c.want[i]]; l.Latency != wantLatency {
				t.Errorf("%s %v: step %d's latency %g, want %g", c.topology, c.factors, i, l.Latency, wantLatency)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %v: the steps' bandwidths %v, want %v", c.topology, c.factors, got, c.want)
		}
	}
	if _, _, err := Topologies["h100-2x8-ib"].stepLinks([]int{4, 8}); err == nil || !strings.Contains(err.Error(), "16 devices, the plan 32") {
		t.Errorf("32 devices on 16: %v", err)
	}
}
