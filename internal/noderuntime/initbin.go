package noderuntime

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
//go:generate gcc -static -O2 -s -Wl,--build-id=none -o pid1.bin ./pid1/pid1.c

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

// pid1Program is what the node's init becomes once it has set the node up (pid1/pid1.c), built
// static by go generate: written in C because a Go program always runs several threads, each
// one of the host's tasks, where this one is a single task, and keeps a few pages of memory
// where the Go init kept about half a megabyte.
//
//go:embed pid1.bin
var pid1Program []byte

// initFile returns a sealed in-memory file holding initProgram, made once per process: every
// node's init is executed from it (its /proc/1/exe).
var initFile = sync.OnceValues(func() (*os.File, error) { return sealedFile("trellis-node-init", initProgram) })

// pid1File returns a sealed in-memory file holding pid1Program, made once per process: every
// node's init executes it once it has set the node up (its /proc/1/exe from then on).
var pid1File = sync.OnceValues(func() (*os.File, error) { return sealedFile("trellis-node-pid1", pid1Program) })

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
