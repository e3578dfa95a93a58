package main

import (
	"strconv"

	"tofuc/lang/bytesize"
)

// byteSize is a flag value in bytes, with an optional unit (package
// lang/bytesize): 16GiB, 80 GB, 1.5TiB, 1000000.
type byteSize int64

func (b *byteSize) Set(s string) error {
	n, err := bytesize.Parse(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Type() string { return "SIZE" }
