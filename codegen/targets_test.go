package codegen_test

// The targets, registered as the pipeline registers them.
import (
	_ "tofuc/codegen/target/host"
	_ "tofuc/codegen/target/nvptx"
)
