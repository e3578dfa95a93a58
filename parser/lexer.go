package parser

import (
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Token types of TDL. Whitespace is never emitted; the grammar elides
// comments, which comments() collects for the formatter.
const (
	tokComment lexer.TokenType = iota + 1
	tokWhitespace
	tokString
	tokFloat
	tokInt
	tokIdent
	tokPunct
)

// tdlLexer is a hand-written scanner (participle's regular-expression
// lexer took most of the parse time). It produces the tokens the grammar in
// grammar.go expects:
//
//	Comment  //[^\n]*
//	String   "(\\.|[^"\\\n])*"
//	Float    \d+\.\d+([eE][-+]?\d+)? | \d+[eE][-+]?\d+
//	Int      \d+
//	Ident    [A-Za-z_][A-Za-z0-9_]*
//	Punct    -> == != <= >= && || .. and one of -+*/%<>=!()[]{},:;
var tdlLexer lexer.Definition = lexDef{}

type lexDef struct{}

func (lexDef) Symbols() map[string]lexer.TokenType {
	return map[string]lexer.TokenType{
		"EOF": lexer.EOF, "Comment": tokComment, "Whitespace": tokWhitespace, "String": tokString,
		"Float": tokFloat, "Int": tokInt, "Ident": tokIdent, "Punct": tokPunct,
	}
}

func (d lexDef) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return d.LexBytes(filename, src)
}

func (lexDef) LexBytes(filename string, src []byte) (lexer.Lexer, error) {
	return &scanner{src: src, pos: lexer.Position{Filename: filename, Line: 1, Column: 1}}, nil
}

type scanner struct {
	src []byte
	pos lexer.Position // of src[pos.Offset]
}

// advance moves past n bytes, keeping line and column.
func (s *scanner) advance(n int) {
	for _, c := range s.src[s.pos.Offset : s.pos.Offset+n] {
		if c == '\n' {
			s.pos.Line++
			s.pos.Column = 1
		} else if c&0xC0 != 0x80 { // count runes, not continuation bytes
			s.pos.Column++
		}
	}
	s.pos.Offset += n
}

var twoCharPuncts = map[string]bool{"->": true, "==": true, "!=": true, "<=": true, ">=": true, "&&": true, "||": true, "..": true}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func (s *scanner) Next() (lexer.Token, error) {
	src, i := s.src, s.pos.Offset
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\r' || src[i] == '\n') {
		i++
	}
	s.advance(i - s.pos.Offset)
	start := s.pos
	if i == len(src) {
		return lexer.EOFToken(start), nil
	}
	typ, n, err := s.scan(i)
	if err != nil {
		return lexer.Token{}, err
	}
	tok := lexer.Token{Type: typ, Value: string(src[i : i+n]), Pos: start}
	s.advance(n)
	return tok, nil
}

// scan returns the type and length of the token at src[i:].
func (s *scanner) scan(i int) (lexer.TokenType, int, error) {
	src := s.src
	c := src[i]
	rest := func(j int) int { return j - i }
	switch {
	case c == '/' && i+1 < len(src) && src[i+1] == '/':
		j := i
		for j < len(src) && src[j] != '\n' {
			j++
		}
		return tokComment, rest(j), nil
	case c == '"':
		j := i + 1
		for j < len(src) && src[j] != '"' && src[j] != '\n' {
			if src[j] == '\\' && j+1 < len(src) && src[j+1] != '\n' {
				j++
			}
			j++
		}
		if j == len(src) || src[j] != '"' {
			return 0, 0, &lexer.Error{Msg: "unterminated string", Pos: s.pos}
		}
		return tokString, rest(j + 1), nil
	case isDigit(c):
		return s.number(i)
	case isLetter(c):
		j := i
		for j < len(src) && (isLetter(src[j]) || isDigit(src[j])) {
			j++
		}
		return tokIdent, rest(j), nil
	}
	if i+1 < len(src) && twoCharPuncts[string(src[i:i+2])] {
		return tokPunct, 2, nil
	}
	switch c {
	case '-', '+', '*', '/', '%', '<', '>', '=', '!', '(', ')', '[', ']', '{', '}', ',', ':', ';':
		return tokPunct, 1, nil
	}
	r, _ := utf8.DecodeRune(src[i:])
	return 0, 0, &lexer.Error{Msg: "unexpected character " + quoteRune(r), Pos: s.pos}
}

func quoteRune(r rune) string {
	if r == utf8.RuneError {
		return "(invalid UTF-8)"
	}
	return fmt.Sprintf("%q", r)
}

// number scans an integer or a float: digits, then an optional fraction
// (a point followed by digits; `1..3` is a range) and an optional exponent.
func (s *scanner) number(i int) (lexer.TokenType, int, error) {
	src := s.src
	digits := func(j int) int {
		for j < len(src) && isDigit(src[j]) {
			j++
		}
		return j
	}
	j := digits(i)
	typ := tokInt
	if j+1 < len(src) && src[j] == '.' && isDigit(src[j+1]) {
		j = digits(j + 1)
		typ = tokFloat
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		k := j + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < len(src) && isDigit(src[k]) {
			j = digits(k)
			typ = tokFloat
		}
	}
	return typ, j - i, nil
}
