package pipeline

// The targets code generation compiles for: each registers itself when
// imported (codegen/target). A new target is a package and a line here
// (docs/architecture.md).
import (
	_ "tofuc/codegen/target/host"
	_ "tofuc/codegen/target/nvptx" // and the SIMT emulator's target
)
