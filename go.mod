module tofuc

go 1.26

require github.com/alecthomas/participle/v2 v2.1.4

require (
	github.com/aclements/go-z3 v0.0.0-20220809013456-4675d5f90ca5 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
