// Package parser reads .tdl text into the syntax tree of package lang.
//
// The grammar is written as participle/v2 struct tags in grammar.go; build.go
// turns participle's parse tree into lang's AST, climbing operator precedence
// over the flat binary sequences the grammar produces. Every node keeps its
// file:line:col. Syntax errors say what was expected and where; Parse never
// panics, whatever its input.
package parser
