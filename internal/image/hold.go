package image

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// An image in use is held: this process keeps its directory open with a shared flock, from
// Build until the process exits (a VM's QEMU has read the image by then; `trellis serve`
// starts VMs from it for as long as it runs). prune and Remove take the lock exclusively,
// without waiting, and leave a held image alone: another trellis that built a newer image,
// or `trellis image rm`, cannot take the files from under a VM about to start.

// ErrInUse is returned when an image to remove is held by a running trellis.
var ErrInUse = errors.New("in use by a running trellis (an up that starts VMs, or a serve)")

// held maps the directories of the images this process holds to their open directories.
var held sync.Map

// hold takes a shared lock on image directory dir for the rest of the process's life. It
// fails (ErrNoImage) if the image was removed meanwhile: the caller builds it again.
func hold(dir string) error {
	if _, ok := held.Load(dir); ok {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return fmt.Errorf("image %s: %w", dir, err)
	}
	// A prune may have removed it between the open and the lock.
	if _, err := load(dir); err != nil {
		f.Close()
		return fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	if _, loaded := held.LoadOrStore(dir, f); loaded {
		f.Close()
	}
	return nil
}

// removeUnheld removes image directory dir unless a trellis holds it (ErrInUse).
func removeUnheld(dir string) error {
	if _, ok := held.Load(dir); ok {
		return ErrInUse
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return ErrInUse
		}
		return err
	}
	return os.RemoveAll(dir)
}
