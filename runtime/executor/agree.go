package executor

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"tofuc/runtime/native"
	"tofuc/runtime/tensor"
)

// ErrRanksDiffer is the error of every rank when the ranks were not
// given the same plan, libraries, inputs or parameters.
var ErrRanksDiffer = errors.New("the ranks differ")

// agree checks that every rank has the same value of what (the plan's
// seal, its inputs' digest): each sends its own to rank 0, which answers
// every rank with the ranks that differ from its own. Every rank then
// fails alike, naming them.
func agree(r Ranks, what, value string) error {
	if r.Rank() != 0 {
		if err := sendString(r, 0, value); err != nil {
			return err
		}
		verdict, err := recvString(r, 0)
		if err != nil || verdict == "" {
			return err
		}
		return fmt.Errorf("%w: %s", ErrRanksDiffer, verdict)
	}
	others := map[string][]int{} // the ranks of each value unlike rank 0's
	for from := 1; from < r.Size(); from++ {
		v, err := recvString(r, from)
		if err != nil {
			return err
		}
		if v != value {
			others[v] = append(others[v], from)
		}
	}
	verdict := ""
	if len(others) > 0 {
		var parts []string
		for v, rs := range others {
			parts = append(parts, fmt.Sprintf("%s %.16s", rankList(rs), v))
		}
		slices.Sort(parts)
		verdict = fmt.Sprintf("rank 0 has %s %.16s, %s", what, value, strings.Join(parts, ", "))
	}
	for to := 1; to < r.Size(); to++ {
		if err := sendString(r, to, verdict); err != nil {
			return err
		}
	}
	if verdict != "" {
		return fmt.Errorf("%w: %s", ErrRanksDiffer, verdict)
	}
	return nil
}

// rankList names ranks rs ("rank 2", "ranks 2, 3").
func rankList(rs []int) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = strconv.Itoa(r)
	}
	if len(rs) == 1 {
		return "rank " + names[0]
	}
	return "ranks " + strings.Join(names, ", ")
}

// sendString sends s as its length, then its bytes.
func sendString(r Ranks, to int, s string) error {
	if err := r.Send(to, binary.LittleEndian.AppendUint64(nil, uint64(len(s)))); err != nil {
		return err
	}
	return r.Send(to, []byte(s))
}

// maxAgreed bounds a string the ranks compare (a rank that sends a
// longer length is refused, not allocated for).
const maxAgreed = 1 << 20

// recvString receives what sendString sent.
func recvString(r Ranks, from int) (string, error) {
	var n [8]byte
	if err := r.Recv(from, n[:]); err != nil {
		return "", err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > maxAgreed {
		return "", fmt.Errorf("rank %d sent a %d-byte value to compare, more than %d", from, size, maxAgreed)
	}
	b := make([]byte, size)
	if err := r.Recv(from, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// digest is the SHA-256 of named tensors, in hex: their names, dtypes,
// shapes and values.
func digest(ts map[string]*tensor.Tensor) (string, error) {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		t := ts[name]
		fmt.Fprintf(h, "%q %s %v\n", name, t.DType, t.Shape)
		b := make([]byte, int64(t.Len())*int64(t.DType.Size()))
		if err := native.Encode(t, b); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// agreeOn checks that every rank was given the same tensors (what: the
// inputs, the parameters) when the program runs as ranks.
func (pr *Program) agreeOn(what string, ts map[string]*tensor.Tensor) error {
	if pr.ranks == nil {
		return nil
	}
	d, err := digest(ts)
	if err != nil {
		return err
	}
	return agree(pr.ranks, what+" (SHA-256)", d)
}
