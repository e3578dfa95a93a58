package mathir

// For the external tests (ptx_test.go, which compiles with the nvptx
// target, a package that imports this one).
var (
	TestModule = testModule
	Tested     = tested
	F32Module  = f32Module
	F32Names   = f32Names
)
