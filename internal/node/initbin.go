package node

import (
	"errors"
	"fmt"
	"os"
	"sync"

	_ "embed" // the node's init program

	"golang.org/x/sys/unix"
)

//go:generate env CGO_ENABLED=0 go build -trimpath -buildvcs=false "-ldflags=-s -w" -o nodeinit.bin ./nodeinit/trellis-node-init
//go:generate gcc -static -O2 -s -Wl,--build-id=none -o enter.bin ./enter/enter.c

// initProgram is the node's init (package nodeinit), built by go generate: a small program
// that starts in a fraction of the time the trellis binary takes, with its hundreds of packages
// to initialise.
//
//go:embed nodeinit.bin
var initProgram []byte

// enterProgram is the program that runs a command in a node (enter/enter.c, see Command),
// built static by go generate: written in C because a process must have a single thread to
// enter a user or mount namespace, which a Go program never has.
//
//go:embed enter.bin
var enterProgram []byte

// initFile returns a sealed in-memory file holding initProgram, made once per process: every
// node's init is executed from it (its /proc/1/exe).
var initFile = sync.OnceValues(func() (*os.File, error) { return sealedFile("trellis-node-init", initProgram) })

// sealedFile returns an in-memory file holding program. Sealed, it cannot be changed, by a
// node's root or anyone; its mode is 0555.
func sealedFile(name string, program []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // a kernel before 6.3, without MFD_EXEC: executable anyway
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("%s program: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err = f.Write(program); err == nil {
		err = f.Chmod(0o555)
	}
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s program: %w", name, err)
	}
	return f, nil
}
