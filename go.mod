module tofuc

go 1.26

require github.com/alecthomas/participle/v2 v2.1.4

require github.com/spf13/pflag v1.0.10 // indirect
