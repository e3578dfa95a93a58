package lang

import "fmt"

// OpaqueFunc describes a function TDL cannot express (Tofu's Opaque): the
// shape of its result from the shapes of its arguments. The interpreter
// supplies the implementations.
type OpaqueFunc struct {
	Doc   string
	Arity int
	Shape func(args [][]Dim) ([]Dim, error)
}

func squareMatrix(args [][]Dim) ([]Dim, error) {
	s := args[0]
	if len(s) != 2 || !s[0].Equal(s[1]) {
		return nil, fmt.Errorf("expects a square matrix, found %s", ShapeString(s))
	}
	return s, nil
}

// OpaqueFuncs lists the opaque functions by name.
var OpaqueFuncs = map[string]OpaqueFunc{
	"cholesky": {Doc: "lower-triangular L with A = L Lᵀ of a symmetric positive-definite matrix", Arity: 1, Shape: squareMatrix},
	"inverse":  {Doc: "the inverse of a square matrix", Arity: 1, Shape: squareMatrix},
}
