package parser

import (
	"github.com/alecthomas/participle/v2/lexer"
)

// maxNesting bounds how deeply an input nests. participle parses
// recursively, and brackets nested a few hundred thousand deep overflow the
// goroutine stack: a fatal error that recover cannot catch. Real TDL nests a
// few dozen levels.
const maxNesting = 1000

// tooDeep returns the position of the first token of src nested more than
// maxNesting deep: inside brackets, lambda bodies and else branches (an
// `else {` block is not counted: it does not nest in the grammar). The count
// restarts after a comma or `in` (siblings) and at each top-level
// declaration. It scans bytes as the lexer would (comments and strings
// skipped), without the lexer's cost; malformed text is left to the parser.
func tooDeep(path string, src []byte) (lexer.Position, bool) {
	depth := 0
	var base []int // the depth at each open bracket
	afterElse := false
	line, lineStart := 1, 0
	for i := 0; i < len(src); {
		c := src[i]
		start := i
		var word string
		switch {
		case c == '\n':
			line, lineStart = line+1, i+1
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '"':
			for i++; i < len(src) && src[i] != '"' && src[i] != '\n'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
			i++
		case c == '_' || c|0x20 >= 'a' && c|0x20 <= 'z':
			for i < len(src) && (src[i] == '_' || src[i]|0x20 >= 'a' && src[i]|0x20 <= 'z' || src[i] >= '0' && src[i] <= '9') {
				i++
			}
			word = string(src[start:i])
		default:
			i++
		}
		if afterElse && c != '{' {
			depth++
		}
		afterElse = false
		switch {
		case c == '(' || c == '[' || c == '{':
			base = append(base, depth)
			depth++
		case c == ')' || c == ']' || c == '}':
			if n := len(base); n > 0 {
				depth = base[n-1]
				base = base[:n-1]
			}
		case c == ',' || word == "in":
			if n := len(base); n > 0 {
				depth = base[n-1] + 1
			} else {
				depth = 0
			}
		case word == "lambda":
			depth++
		case word == "else":
			afterElse = true
		case len(base) == 0 && (word == "op" || word == "model" || word == "rule" || word == "import"):
			depth = 0
		}
		if depth > maxNesting {
			return lexer.Position{Filename: path, Offset: start, Line: line, Column: start - lineStart + 1}, true
		}
	}
	return lexer.Position{}, false
}
