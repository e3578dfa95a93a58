// Package suggest finds, for a name that names nothing, the name its
// user probably meant ("did you mean"), for every message of tofuc that
// refuses one: the checker's undefined names, the command line's flags
// and operators.
package suggest

import "fmt"

// DidYouMean is " (did you mean C?)" for the candidate C closest to name
// within edit distance 2 (and less than name's length), the first in
// sort order among equals; "" when none is.
func DidYouMean(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := editDistance(name, c); d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > 2 || bestD >= len(name) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
