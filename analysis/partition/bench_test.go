package partition_test

import (
	"fmt"
	"testing"

	"tofuc/analysis/partition"
)

// BenchmarkSearch times the search alone on the models: the Wide
// ResNet-152 (width 10, batch 8) and the 10-layer RNN (hidden 4096, batch
// 512, 20 steps) training graphs on 8 and 64 devices. Each iteration
// searches a freshly loaded graph (loading is outside the timer), so the
// strategy analysis of its instances is inside, as in tofuc partition's
// search_seconds. Results in docs/partition.md.
func BenchmarkSearch(b *testing.B) {
	models := []struct {
		name, file string
		set        map[string]int64
	}{
		{"WResNet-152-10", "wresnet", map[string]int64{"depth": 152, "width": 10, "batch": 8}},
		{"RNN-10-4K", "rnn", map[string]int64{"layers": 10, "hidden": 4096, "batch": 512}},
	}
	for _, m := range models {
		for _, devices := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/%d", m.name, devices), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					g := exampleGraph(b, m.file, true, m.set)
					b.StartTimer()
					r, err := partition.Search(g, devices, partition.Options{})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(r.Cost.CommBytes), "bytes/step")
				}
			})
		}
	}
}
