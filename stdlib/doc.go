// Package stdlib embeds TDL's standard operator library: the .tdl files in
// this folder, visible to every module as its prelude.
package stdlib

import (
	"embed"
	"io/fs"
	"sort"
)

//go:embed *.tdl
var files embed.FS

// File is one embedded standard-library source.
type File struct {
	Name string // e.g. "std/nn.tdl"
	Src  []byte
}

// Files returns every standard-library file, sorted by name.
func Files() []File {
	names, _ := fs.Glob(files, "*.tdl")
	sort.Strings(names)
	out := make([]File, 0, len(names))
	for _, n := range names {
		src, _ := files.ReadFile(n)
		out = append(out, File{Name: "std/" + n, Src: src})
	}
	return out
}
