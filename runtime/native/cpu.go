package native

import "golang.org/x/sys/cpu"

// cpuFeatures are the instruction-set extensions a shared object
// compiled for this machine's CPU (llc -mcpu=native) may use, and
// whether this CPU has each, as Go detects them (GODEBUG=cpu.NAME=off
// turns one off; another architecture has none).
func cpuFeatures() []struct {
	name string
	has  bool
} {
	x := cpu.X86
	return []struct {
		name string
		has  bool
	}{
		{"sse3", x.HasSSE3}, {"ssse3", x.HasSSSE3}, {"sse4.1", x.HasSSE41}, {"sse4.2", x.HasSSE42},
		{"popcnt", x.HasPOPCNT}, {"avx", x.HasAVX}, {"avx2", x.HasAVX2}, {"fma", x.HasFMA},
		{"bmi1", x.HasBMI1}, {"bmi2", x.HasBMI2}, {"avx512f", x.HasAVX512F}, {"avx512bw", x.HasAVX512BW},
		{"avx512dq", x.HasAVX512DQ}, {"avx512vl", x.HasAVX512VL}, {"avx512cd", x.HasAVX512CD},
	}
}

// CPUFeatures lists the extensions this CPU has (of those cpuFeatures
// knows): what a shared object compiled here may require.
func CPUFeatures() []string {
	var out []string
	for _, f := range cpuFeatures() {
		if f.has {
			out = append(out, f.name)
		}
	}
	return out
}

// UnknownFeatures lists the extensions of required that cpuFeatures
// does not know.
func UnknownFeatures(required []string) []string {
	known := map[string]bool{}
	for _, f := range cpuFeatures() {
		known[f.name] = true
	}
	var out []string
	for _, r := range required {
		if !known[r] {
			out = append(out, r)
		}
	}
	return out
}

// MissingFeatures lists the extensions of required this CPU lacks.
func MissingFeatures(required []string) []string {
	has := map[string]bool{}
	for _, f := range cpuFeatures() {
		has[f.name] = f.has
	}
	var out []string
	for _, r := range required {
		if !has[r] {
			out = append(out, r)
		}
	}
	return out
}
