package npy

import (
	"fmt"
	"strconv"
	"strings"
)

// tuple is a parsed Python tuple.
type tuple []any

// pyParser parses the subset of Python literals that .npy headers use:
// dicts, tuples, lists, strings, integers (with an optional Python 2 "L"
// suffix), True, False and None. Values are map[string]any, tuple, string,
// int64, bool and nil.
type pyParser struct {
	s     string
	i     int
	depth int
}

func (p *pyParser) skipSpace() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "..."
	}
	return r
}

func (p *pyParser) peek() byte {
	p.skipSpace()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) expect(c byte) error {
	if p.peek() != c {
		if p.i >= len(p.s) {
			return fmt.Errorf("expected %q at the end of the header", c)
		}
		return fmt.Errorf("expected %q at %q", c, p.rest())
	}
	p.i++
	return nil
}

func (p *pyParser) value() (any, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 32 {
		return nil, fmt.Errorf("nesting too deep")
	}
	switch c := p.peek(); {
	case c == '{':
		return p.dict()
	case c == '(' || c == '[':
		return p.seq()
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || c >= '0' && c <= '9':
		return p.integer()
	case c == 0:
		return nil, fmt.Errorf("unexpected end of the header")
	}
	for _, kw := range []struct {
		s string
		v any
	}{{"True", true}, {"False", false}, {"None", nil}} {
		if strings.HasPrefix(p.s[p.i:], kw.s) {
			p.i += len(kw.s)
			return kw.v, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q", p.rest())
}

func (p *pyParser) dict() (any, error) {
	p.i++ // {
	d := map[string]any{}
	for p.peek() != '}' {
		k, err := p.value()
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("dict key %v is not a string", k)
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if _, dup := d[ks]; dup {
			return nil, fmt.Errorf("duplicate key %q", ks)
		}
		d[ks] = v
		if p.peek() != ',' {
			break
		}
		p.i++
	}
	if err := p.expect('}'); err != nil {
		return nil, err
	}
	return d, nil
}

func (p *pyParser) seq() (any, error) {
	open := p.s[p.i]
	close := byte(')')
	if open == '[' {
		close = ']'
	}
	p.i++
	t := tuple{}
	for p.peek() != close {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		t = append(t, v)
		if p.peek() != ',' {
			break
		}
		p.i++
	}
	if err := p.expect(close); err != nil {
		return nil, err
	}
	return t, nil
}

func (p *pyParser) str() (any, error) {
	q := p.s[p.i]
	j := strings.IndexByte(p.s[p.i+1:], q)
	if j < 0 {
		return nil, fmt.Errorf("unterminated string")
	}
	s := p.s[p.i+1 : p.i+1+j]
	if strings.IndexByte(s, '\\') >= 0 {
		return nil, fmt.Errorf("escape sequences in header strings are not supported")
	}
	p.i += j + 2
	return s, nil
}

func (p *pyParser) integer() (any, error) {
	j := p.i
	if p.s[j] == '-' || p.s[j] == '+' {
		j++
	}
	k := j
	for k < len(p.s) && p.s[k] >= '0' && p.s[k] <= '9' {
		k++
	}
	if k == j {
		return nil, fmt.Errorf("unexpected %q", p.rest())
	}
	n, err := strconv.ParseInt(p.s[p.i:k], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad integer %q", p.s[p.i:k])
	}
	p.i = k
	if p.i < len(p.s) && (p.s[p.i] == 'L' || p.s[p.i] == 'l') {
		p.i++
	}
	return n, nil
}
