package pipeline

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/partition"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
)

// Choices are a compile's options as a user gives them: the flags that
// tofuc compile shares with the compiled backends of eval and bench, and
// the Python package's arguments of the same names (docs/python.md), so
// that the same choices build the same plan. Options checks them; its
// errors name the flags.
type Choices struct {
	Devices    int
	Memory     int64
	Objective  string // partition.Time or partition.Bytes; "": time
	NoOptimize bool
	Precision  precision.Mode
	// Backends are the libraries as --backends names them
	// (ResolveBackends).
	Backends []string
	// Train, when not nil, compiles the training graph.
	Train *TrainChoices
}

// TrainChoices are the training flags (--loss, --optimizer, --lr,
// --loss-scale, --lr-schedule, --clip-norm).
type TrainChoices struct {
	Loss, Optimizer string
	LR, LossScale   float64
	// Schedule is --lr-schedule's specification (ParseSchedule; "":
	// a constant rate).
	Schedule string
	ClipNorm float64
}

// Validate rejects unknown losses and optimizers, a negative rate or
// clipping norm, and a schedule lr_schedule cannot follow.
func (t *TrainChoices) Validate() error {
	if !slices.Contains(autodiff.Losses, t.Loss) {
		return fmt.Errorf("unknown loss %q (expected %s)", t.Loss, strings.Join(autodiff.Losses, " or "))
	}
	if !slices.Contains(autodiff.Optimizers, t.Optimizer) {
		return fmt.Errorf("unknown optimizer %q (expected %s)", t.Optimizer, strings.Join(autodiff.Optimizers, ", "))
	}
	if t.LR < 0 {
		return fmt.Errorf("--lr must not be negative")
	}
	if !(t.ClipNorm >= 0 && t.ClipNorm <= math.MaxFloat32) {
		return fmt.Errorf("--clip-norm must be a positive number at most %.4g (f32's largest), or 0 for none", math.MaxFloat32)
	}
	_, err := ParseSchedule(t.Schedule)
	return err
}

// Options are the training options of a graph computed in mode p: the
// mode's loss scale unless LossScale gives one. The choices are valid
// (Validate).
func (t *TrainChoices) Options(p precision.Mode) autodiff.TrainOptions {
	scale := t.LossScale
	if scale == 0 {
		scale = p.LossScale()
	}
	sched, _ := ParseSchedule(t.Schedule)
	return autodiff.TrainOptions{Loss: t.Loss, Optimizer: t.Optimizer, LR: t.LR, LossScale: scale, Schedule: sched, ClipNorm: t.ClipNorm}
}

// ParseSchedule reads --lr-schedule: a comma-separated list of the decay
// (none, step, exponential, linear, cosine) and NAME=VALUE settings of
// warmup, total, every (steps), gamma and final, e.g.
// "cosine,warmup=100,total=5000,final=0.05" or "step,every=1000,gamma=0.5".
// An empty item, a second decay, a repeated setting and a setting the
// decay does not read are refused.
func ParseSchedule(spec string) (autodiff.Schedule, error) {
	s := autodiff.Schedule{Gamma: 0.1, Every: 1}
	if strings.TrimSpace(spec) == "" {
		return s, nil
	}
	fail := func(format string, args ...any) (autodiff.Schedule, error) {
		return s, fmt.Errorf("--lr-schedule %q: %s", spec, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		name, value, isSetting := strings.Cut(strings.TrimSpace(item), "=")
		switch {
		case name == "":
			return fail("an empty item")
		case !isSetting && s.Decay != "":
			return fail("two decays, %s and %s", s.Decay, name)
		case !isSetting:
			s.Decay = name
			continue
		case seen[name]:
			return fail("%s given twice", name)
		}
		seen[name] = true
		if err := setSchedule(&s, name, value); err != nil {
			return fail("%v", err)
		}
	}
	if err := s.Validate(); err != nil {
		return fail("%v", err)
	}
	for name := range seen {
		if !slices.Contains(scheduleReads[s.Decay], name) {
			return fail("%s does nothing with the decay %q (it reads %s)", name, s.Decay, strings.Join(scheduleReads[s.Decay], ", "))
		}
	}
	return s, nil
}

// scheduleReads lists the settings each decay reads.
var scheduleReads = map[string][]string{
	"": {"warmup"}, "none": {"warmup"},
	"step":        {"warmup", "every", "gamma"},
	"exponential": {"warmup", "gamma"},
	"linear":      {"warmup", "total", "final"},
	"cosine":      {"warmup", "total", "final"},
}

// setSchedule sets one NAME=VALUE of a schedule.
func setSchedule(s *autodiff.Schedule, name, value string) error {
	var err error
	switch name {
	case "warmup":
		s.Warmup, err = strconv.ParseInt(value, 10, 32)
	case "total":
		s.Total, err = strconv.ParseInt(value, 10, 32)
	case "every":
		s.Every, err = strconv.ParseInt(value, 10, 32)
	case "gamma":
		s.Gamma, err = strconv.ParseFloat(value, 64)
	case "final":
		s.Final, err = strconv.ParseFloat(value, 64)
	default:
		return fmt.Errorf("unknown setting %s (expected warmup, total, every, gamma or final)", name)
	}
	if err != nil {
		return fmt.Errorf("%s=%s is not a number", name, value)
	}
	return nil
}

// Options checks the choices and makes the compile's Options.
func (c Choices) Options() (Options, error) {
	switch {
	case c.Devices < 1 || c.Devices > partition.MaxDevices:
		return Options{}, fmt.Errorf("--devices must be 1 to %d", partition.MaxDevices)
	case c.Memory < 0 || c.Memory > 0 && c.Devices == 1:
		return Options{}, fmt.Errorf("--memory goes with --devices N > 1, and must not be negative")
	case c.Objective != "" && c.Objective != partition.Time && c.Objective != partition.Bytes:
		return Options{}, fmt.Errorf("--objective must be %s or %s", partition.Time, partition.Bytes)
	case c.Objective != "" && c.Devices == 1:
		return Options{}, fmt.Errorf("--objective goes with --devices N > 1")
	}
	// Placement is off in the exact mode: no library loaded, the
	// names checked.
	libs, err := ResolveBackends(c.Backends, c.Precision.InF32())
	if err != nil {
		return Options{}, fmt.Errorf("--backends: %w", err)
	}
	if !c.Precision.InF32() {
		warnUnofferedGPU(c.Backends, c.Backends, c.Precision) // none offered
	}
	opts := Options{Devices: c.Devices, Memory: c.Memory, Objective: c.Objective, NoOptimize: c.NoOptimize, Precision: c.Precision, Backends: libs}
	if c.Train != nil {
		if err := c.Train.Validate(); err != nil {
			return Options{}, err
		}
		t := c.Train.Options(c.Precision)
		opts.Train = &t
	}
	return opts, nil
}

// MaxThreads bounds --threads: every thread is a goroutine, and an
// operating-system thread while it runs native code, so that a count
// beyond any machine's cores only exhausts memory.
const MaxThreads = 1024

// CheckThreads refuses a --threads below 0 or above MaxThreads.
func CheckThreads(n int) error {
	switch {
	case n < 0:
		return errors.New("--threads must not be negative")
	case n > MaxThreads:
		return fmt.Errorf("--threads %d is more than %d, the most tofuc starts (0: one per core, %d on this machine)", n, MaxThreads, runtime.NumCPU())
	}
	return nil
}

// ParseSets parses repeated NAME=VALUE model attribute overrides (--set).
func ParseSets(sets []string) (map[string]ir.AttrValue, error) {
	out := map[string]ir.AttrValue{}
	for _, s := range sets {
		name, value, ok := strings.Cut(s, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("--set %q: expected NAME=VALUE", s)
		}
		v, err := parseAttrValue(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("--set %s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// parseAttrValue reads an attribute value written on the command line: an
// integer, a float, true or false, a list [a, b, ...], or else a string.
func parseAttrValue(s string) (ir.AttrValue, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ir.AttrValue{Kind: ir.AttrInt, Int: n}, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return ir.AttrValue{Kind: ir.AttrFloat, Float: f}, nil
	}
	switch s {
	case "true", "false":
		return ir.AttrValue{Kind: ir.AttrBool, Bool: s == "true"}, nil
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return ir.AttrValue{}, fmt.Errorf("unterminated list %q", s)
		}
		list := ir.AttrValue{Kind: ir.AttrList}
		inner := strings.TrimSpace(s[1 : len(s)-1])
		if inner == "" {
			return list, nil
		}
		for _, part := range strings.Split(inner, ",") {
			v, err := parseAttrValue(strings.TrimSpace(part))
			if err != nil {
				return list, err
			}
			list.List = append(list.List, v)
		}
		return list, nil
	}
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	return ir.AttrValue{Kind: ir.AttrString, Str: s}, nil
}
