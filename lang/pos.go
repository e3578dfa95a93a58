package lang

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a source position. The zero Pos means "no position".
type Pos struct {
	File string
	Line int // 1-based
	Col  int // 1-based, in bytes
}

func (p Pos) String() string {
	if p.Line == 0 {
		if p.File == "" {
			return "-"
		}
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// IsValid reports whether p names a line.
func (p Pos) IsValid() bool { return p.Line > 0 }

// Error is one diagnostic a user can act on.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string {
	if !e.Pos.IsValid() && e.Pos.File == "" {
		return e.Msg
	}
	return e.Pos.String() + ": " + e.Msg
}

// Errorf builds an *Error.
func Errorf(pos Pos, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// MaxErrors bounds how many diagnostics one run reports.
const MaxErrors = 20

// ErrorList collects diagnostics; one run reports many problems at once.
type ErrorList []*Error

// Add appends a diagnostic.
func (l *ErrorList) Add(pos Pos, format string, args ...any) {
	*l = append(*l, Errorf(pos, format, args...))
}

// Append adds err, flattening ErrorLists and wrapping foreign errors.
func (l *ErrorList) Append(err error) {
	switch e := err.(type) {
	case nil:
	case *Error:
		*l = append(*l, e)
	case ErrorList:
		*l = append(*l, e...)
	default:
		*l = append(*l, &Error{Msg: err.Error()})
	}
}

// Sort orders diagnostics by position and drops exact duplicates.
func (l ErrorList) Sort() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	out := l[:0]
	for i, e := range l {
		if i > 0 && e.Pos == l[i-1].Pos && e.Msg == l[i-1].Msg {
			continue
		}
		out = append(out, e)
	}
	return out
}

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i == MaxErrors {
			fmt.Fprintf(&b, "(and %d more errors)\n", len(l)-MaxErrors)
			break
		}
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Err returns nil for an empty list and the list otherwise.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l.Sort()
}
