package native

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
)

// checkELF refuses bytes that are not a whole shared object: the loader
// maps an object's segments from its file, and touching a segment that
// ends beyond the file dies of SIGBUS. Its headers must be readable, it
// must be a shared object (ELF type ET_DYN), and every segment and
// section it holds must lie within its bytes.
func checkELF(name string, so []byte) error {
	f, err := elf.NewFile(bytes.NewReader(so))
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s is not a whole shared object: its headers lie beyond its %d bytes", name, len(so))
	}
	if err != nil {
		return fmt.Errorf("%s is not a shared object: %w", name, err)
	}
	if f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is not a shared object (ELF type %s)", name, f.Type)
	}
	size := uint64(len(so))
	for i, p := range f.Progs {
		if p.Filesz > size || p.Off > size-p.Filesz {
			return fmt.Errorf("%s is not a whole shared object: its segment %d (%s) lies at bytes %d to %d, beyond its %d bytes", name, i, p.Type, p.Off, p.Off+p.Filesz, size)
		}
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOBITS && (s.Size > size || s.Offset > size-s.Size) {
			return fmt.Errorf("%s is not a whole shared object: its section %s lies at bytes %d to %d, beyond its %d bytes", name, s.Name, s.Offset, s.Offset+s.Size, size)
		}
	}
	return nil
}
