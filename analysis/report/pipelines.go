package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"tofuc/analysis/stages"
	"tofuc/lang"
)

// Pipelines are the pipeline plans of a training graph (tofuc partition
// --pipeline): GraphPipe's and the sequential pipeline's, simulated on
// the same topology as the partition plans, not compiled.
type Pipelines struct {
	Layers int            `json:"layers"`
	Batch  int64          `json:"batch"`
	Plans  []PipelinePlan `json:"plans"`
}

// PipelinePlan is one pipeline plan.
type PipelinePlan struct {
	Method       string          `json:"method"`
	Structure    string          `json:"structure"`
	MicroBatch   int64           `json:"micro_batch"`
	MicroBatches int             `json:"micro_batches"`
	StepSeconds  float64         `json:"step_seconds"`
	Throughput   float64         `json:"samples_per_second"`
	Bubble       float64         `json:"bubble"`
	Devices      int             `json:"devices"`
	Search       float64         `json:"search_seconds"`
	Stages       []PipelineStage `json:"stages"`
}

// PipelineStage is a stage: its layers by their first forward
// operator, its devices, its seconds per micro-batch and per step.
type PipelineStage struct {
	Layers          []string `json:"layers"`
	Devices         []int    `json:"devices"`
	Next            []int    `json:"next"`
	ForwardSeconds  float64  `json:"forward_seconds"`
	BackwardSeconds float64  `json:"backward_seconds"`
	SyncSeconds     float64  `json:"sync_seconds"`
	TimePerSample   float64  `json:"time_per_sample"`
	InFlight        int      `json:"in_flight"`
	MemoryBytes     int64    `json:"memory_bytes"`
}

// NewPipelines describes plans of ls.
func NewPipelines(ls *stages.Layers, plans ...*stages.Plan) *Pipelines {
	out := &Pipelines{Layers: len(ls.Layers), Batch: ls.Batch}
	for _, p := range plans {
		pp := PipelinePlan{Method: p.Method, Structure: p.Structure, MicroBatch: p.MicroBatch, MicroBatches: p.MicroBatches,
			StepSeconds: p.Seconds, Throughput: p.Throughput(ls.Batch), Bubble: p.Bubble, Devices: p.Devices(), Search: p.Search}
		for _, s := range p.Stages {
			ps := PipelineStage{Devices: s.Devices, Next: s.Succ, ForwardSeconds: s.Forward, BackwardSeconds: s.Backward,
				SyncSeconds: s.Sync, TimePerSample: s.TimePerSample, InFlight: s.InFlight, MemoryBytes: s.MemoryBytes}
			for _, l := range s.Layers {
				ps.Layers = append(ps.Layers, ls.Layers[l].Name)
			}
			pp.Stages = append(pp.Stages, ps)
		}
		out.Plans = append(out.Plans, pp)
	}
	return out
}

// summary writes the plans side by side, then each one's stages.
func (p *Pipelines) summary(w io.Writer, partitionStep float64) {
	fmt.Fprintf(w, "pipeline plans (%d layers, batch %d; simulated, not compiled: tofuc runs operator-partitioned plans only)\n", p.Layers, p.Batch)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  method\tstructure\tstages\tdevices\tmicro-batches\tstep time\tsamples/s\tbubble\tsearch\t")
	for _, pl := range p.Plans {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d of %d\t%s\t%.0f\t%.0f%%\t%.2f s\t\n", pl.Method, pl.Structure, len(pl.Stages), pl.Devices,
			pl.MicroBatches, pl.MicroBatch, Seconds(pl.StepSeconds), pl.Throughput, 100*pl.Bubble, pl.Search)
	}
	tw.Flush()
	if len(p.Plans) > 1 {
		fmt.Fprintf(w, "  %s / %s throughput: %.2f; the operator-partitioned plan above: %s per step\n", p.Plans[0].Method, p.Plans[1].Method,
			p.Plans[0].Throughput/p.Plans[1].Throughput, Seconds(partitionStep))
	}
	for _, pl := range p.Plans {
		fmt.Fprintf(w, "  %s's stages (per micro-batch of %d: forward, backward; per step: all-reduce and updates):\n", pl.Method, pl.MicroBatch)
		for i, s := range pl.Stages {
			fmt.Fprintf(w, "    %d: %s on devices %s: %s, %s; %s; %s a sample; %d in flight, %s a device; feeds %s\n", i, layerRange(s.Layers),
				joinInts(s.Devices, ","), Seconds(s.ForwardSeconds), Seconds(s.BackwardSeconds), Seconds(s.SyncSeconds),
				Seconds(s.TimePerSample), s.InFlight, lang.FormatBytes(s.MemoryBytes), nextStages(s.Next))
		}
	}
}

func layerRange(layers []string) string {
	if len(layers) == 1 {
		return layers[0]
	}
	return fmt.Sprintf("%s .. %s (%d layers)", layers[0], layers[len(layers)-1], len(layers))
}

func nextStages(next []int) string {
	if len(next) == 0 {
		return "the loss"
	}
	return "stage " + joinInts(next, ", ")
}
