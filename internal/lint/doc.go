// Package lint holds repository-wide checks of the source code: tests that
// read every package of the module (its parsed and type-checked Go files)
// and fail where the code breaks a rule the compiler does not enforce, such
// as fmt.Errorf formatting an error without wrapping it (errorf_test.go).
// It has no code of its own.
package lint
