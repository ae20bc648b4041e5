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

// initProgram is the node's init (package nodeinit), built by go generate: a small program
// that starts in a fraction of the time the trellis binary takes, with its hundreds of packages
// to initialise.
//
//go:embed nodeinit.bin
var initProgram []byte

// initFile returns a sealed in-memory file holding initProgram, made once per process: every
// node's init is executed from it (its /proc/1/exe). Sealed, it cannot be changed, by a node's
// root or anyone; its mode is 0555.
var initFile = sync.OnceValues(func() (*os.File, error) {
	fd, err := unix.MemfdCreate("trellis-node-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // a kernel before 6.3, without MFD_EXEC: executable anyway
		fd, err = unix.MemfdCreate("trellis-node-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("node init program: %w", err)
	}
	f := os.NewFile(uintptr(fd), "trellis-node-init")
	if _, err = f.Write(initProgram); err == nil {
		err = f.Chmod(0o555)
	}
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("node init program: %w", err)
	}
	return f, nil
})
