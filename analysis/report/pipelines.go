package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"tofuc/analysis/partition"
	"tofuc/analysis/stages"
	"tofuc/lang"
)

// Pipelines are the pipeline plans of a training graph (tofuc partition
// --pipeline): GraphPipe's and the sequential pipeline's, simulated on
// the same topology as the partition plans.
type Pipelines struct {
	Layers int            `json:"layers"`
	Batch  int64          `json:"batch"`
	Plans  []PipelinePlan `json:"plans"`
	// Chosen says that the first plan (GraphPipe's) is chosen over the
	// operator-partitioned plan: its simulated step is shorter, under
	// the time objective, or Asked. tofuc compile --pipeline then runs
	// it.
	Chosen bool `json:"chosen"`
	// Asked says that it was chosen, though not faster, because the
	// user asked for it (tofuc compile --pipeline=always).
	Asked bool `json:"asked,omitempty"`
	// Error says why there are no plans ("" when there are).
	Error string `json:"error,omitempty"`
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

// PipelineTask is a pass of one micro-batch on a stage, in seconds
// from the step's start.
type PipelineTask struct {
	Micro    int     `json:"micro"`
	Backward bool    `json:"backward"`
	Start    float64 `json:"start"`
	End      float64 `json:"end"`
}

// PipelineStage is a stage: its layers by their first forward
// operator, its devices, its seconds per micro-batch and per step.
type PipelineStage struct {
	Layers          []string `json:"layers"`
	Devices         []int    `json:"devices"`
	Next            []int    `json:"next"`
	MicroBatch      int64    `json:"micro_batch"`
	MicroBatches    int      `json:"micro_batches"`
	ForwardSeconds  float64  `json:"forward_seconds"`
	BackwardSeconds float64  `json:"backward_seconds"`
	SyncSeconds     float64  `json:"sync_seconds"`
	TimePerSample   float64  `json:"time_per_sample"`
	InFlight        int      `json:"in_flight"`
	MemoryBytes     int64    `json:"memory_bytes"`
	// Schedule is its passes in the order it runs them (1F1B).
	Schedule []PipelineTask `json:"schedule"`
}

// NewPipelines describes plans of ls.
func NewPipelines(ls *stages.Layers, plans ...*stages.Plan) *Pipelines {
	out := &Pipelines{Layers: len(ls.Layers), Batch: ls.Batch}
	for _, p := range plans {
		pp := PipelinePlan{Method: p.Method, Structure: p.Structure, MicroBatch: p.MicroBatch, MicroBatches: p.MicroBatches,
			StepSeconds: p.Seconds, Throughput: p.Throughput(ls.Batch), Bubble: p.Bubble, Devices: p.Devices(), Search: p.SearchSeconds}
		for i, s := range p.Stages {
			ps := PipelineStage{Devices: s.Devices, Next: append([]int{}, s.Succ...), MicroBatch: s.MicroBatch, MicroBatches: s.MicroBatches, ForwardSeconds: s.Forward, BackwardSeconds: s.Backward,
				SyncSeconds: s.Sync, TimePerSample: s.TimePerSample, InFlight: s.InFlight, MemoryBytes: s.MemoryBytes}
			for _, l := range s.Layers {
				ps.Layers = append(ps.Layers, ls.Layers[l].Name)
			}
			for _, task := range p.Schedule[i] {
				ps.Schedule = append(ps.Schedule, PipelineTask(task))
			}
			pp.Stages = append(pp.Stages, ps)
		}
		out.Plans = append(out.Plans, pp)
	}
	return out
}

// summary writes the plans side by side, then each one's stages;
// objective is the partition search's.
func (p *Pipelines) summary(w io.Writer, partitionStep float64, objective string) {
	if p.Error != "" {
		fmt.Fprintf(w, "pipeline plans: none: %s\n", p.Error)
		return
	}
	fmt.Fprintf(w, "pipeline plans (%d layers, batch %d; simulated)\n", p.Layers, p.Batch)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  method\tstructure\tstages\tdevices\tmicro-batches × samples\tstep time\tsamples/s\tbubble\tsearch\t")
	for _, pl := range p.Plans {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%.0f\t%.0f%%\t%.2f s\t\n", pl.Method, pl.Structure, len(pl.Stages), pl.Devices,
			pl.microBatches(), Seconds(pl.StepSeconds), pl.Throughput, 100*pl.Bubble, pl.Search)
	}
	tw.Flush()
	first := p.Plans[0]
	if len(p.Plans) > 1 {
		fmt.Fprintf(w, "  %s / %s throughput: %.2f\n", first.Method, p.Plans[1].Method, first.Throughput/p.Plans[1].Throughput)
	}
	if partitionStep > 0 {
		verdict := "the operator-partitioned plan stays chosen"
		switch {
		case p.Asked:
			verdict = fmt.Sprintf("%s's plan is chosen, as --pipeline=always asks", first.Method)
		case objective == partition.Bytes:
			verdict += " (the objective is bytes, and pipeline plans are priced in time only)"
		case p.Chosen:
			verdict = fmt.Sprintf("%s's plan is chosen (tofuc compile --pipeline runs it)", first.Method)
		}
		fmt.Fprintf(w, "  %s / the operator-partitioned plan (%s a step) throughput: %.2f: %s\n",
			first.Method, Seconds(partitionStep), partitionStep/first.StepSeconds, verdict)
	}
	for _, pl := range p.Plans {
		fmt.Fprintf(w, "  %s's stages (micro-batches × samples: forward, backward of one; per step: all-reduce and updates):\n", pl.Method)
		for i, s := range pl.Stages {
			fmt.Fprintf(w, "    %d: %s on devices %s: %d × %d: %s, %s; %s; %s a sample; %d in flight, %s a device; feeds %s\n", i, layerRange(s.Layers),
				joinInts(s.Devices, ","), s.MicroBatches, s.MicroBatch, Seconds(s.ForwardSeconds), Seconds(s.BackwardSeconds), Seconds(s.SyncSeconds),
				Seconds(s.TimePerSample), s.InFlight, lang.FormatBytes(s.MemoryBytes), nextStages(s.Next))
		}
	}
}

// microBatches is "M × b", or "per stage" where the stages' differ.
func (pl *PipelinePlan) microBatches() string {
	for _, s := range pl.Stages {
		if s.MicroBatch != pl.Stages[0].MicroBatch {
			return "per stage"
		}
	}
	return fmt.Sprintf("%d × %d", pl.Stages[0].MicroBatches, pl.Stages[0].MicroBatch)
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

// Timeline draws a plan's schedule: a row per stage, its forward
// passes blue, its backward passes orange, its all-reduce and updates
// green, on one time axis from the step's start to its end.
func (pl *PipelinePlan) Timeline() template.HTML {
	const label, width, row = 150.0, 850.0, 20.0
	scale := width / pl.StepSeconds
	var b strings.Builder
	height := row*float64(len(pl.Stages)) + 18
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-size="11">`, label+width+10, height)
	for i, s := range pl.Stages {
		y := row * float64(i)
		fmt.Fprintf(&b, `<text x="0" y="%.1f">stage %d (%s)</text>`, y+row*0.7, i, deviceList(s.Devices))
		end := 0.0
		for _, t := range s.Schedule {
			fill := "hsl(210,70%,55%)"
			if t.Backward {
				fill = "hsl(25,85%,55%)"
			}
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" stroke="#fff" stroke-width="0.5"><title>micro-batch %d %s: %s to %s</title></rect>`,
				label+t.Start*scale, y+2, max(0.5, (t.End-t.Start)*scale), row-4, fill, t.Micro, passName(t.Backward), Seconds(t.Start), Seconds(t.End))
			end = max(end, t.End)
		}
		if s.SyncSeconds > 0 {
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="hsl(130,55%%,45%%)"><title>all-reduce and updates: %s</title></rect>`,
				label+end*scale, y+2, max(0.5, s.SyncSeconds*scale), row-4, Seconds(s.SyncSeconds))
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">0</text><text x="%.0f" y="%.0f" text-anchor="end">%s</text></svg>`, label, height-3, label+width, height-3, Seconds(pl.StepSeconds))
	return template.HTML(b.String())
}

func passName(backward bool) string {
	if backward {
		return "backward"
	}
	return "forward"
}

// deviceList names devices compactly: 0–3 for a run.
func deviceList(ds []int) string {
	if len(ds) > 1 && ds[len(ds)-1]-ds[0] == len(ds)-1 {
		return fmt.Sprintf("devices %d–%d", ds[0], ds[len(ds)-1])
	}
	return "device " + joinInts(ds, ",")
}
