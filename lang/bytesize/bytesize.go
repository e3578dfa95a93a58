package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var units = map[string]float64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40, // as ccache writes them
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
}

// Parse reads s as a number of bytes.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	unit, ok := units[strings.ToLower(strings.TrimSpace(t[i:]))]
	n, err := strconv.ParseFloat(t[:i], 64)
	switch {
	case !ok || err != nil:
		return 0, fmt.Errorf("%q is not a size: write bytes, or a number and a unit (16GiB, 80GB)", s)
	case n*unit >= math.MaxInt64:
		return 0, fmt.Errorf("%q is more than 2^63 bytes", s)
	}
	return int64(n * unit), nil
}
