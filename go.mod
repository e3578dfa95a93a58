module tofuc

go 1.26

require (
	github.com/aclements/go-z3 v0.0.0-20220809013456-4675d5f90ca5
	github.com/alecthomas/participle/v2 v2.1.4
	github.com/ebitengine/purego v0.10.2
	github.com/llir/llvm v0.3.6
	github.com/spf13/pflag v1.0.10
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/mewmew/float v0.0.0-20201204173432-505706aa38fa // indirect
	github.com/pkg/errors v0.9.1 // indirect
	golang.org/x/mod v0.4.2 // indirect
	golang.org/x/sys v0.0.0-20210510120138-977fb7262007 // indirect
	golang.org/x/tools v0.1.4 // indirect
	golang.org/x/xerrors v0.0.0-20200804184101-5ec99f83aff1 // indirect
)
