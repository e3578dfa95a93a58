package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag value in bytes, with an optional unit: binary (KiB,
// MiB, GiB, TiB), decimal (KB, MB, GB, TB) or B, any case, a space
// allowed: 16GiB, 80 GB, 1.5TiB, 1000000.
type byteSize int64

var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	unit, ok := byteUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	n, err := strconv.ParseFloat(t[:i], 64)
	switch {
	case !ok || err != nil:
		return fmt.Errorf("%q is not a size: write bytes, or a number and a unit (16GiB, 80GB)", s)
	case n*unit >= math.MaxInt64:
		return fmt.Errorf("%q is more than 2^63 bytes", s)
	}
	*b = byteSize(n * unit)
	return nil
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Type() string { return "SIZE" }
