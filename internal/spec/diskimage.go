package spec

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// qcow2Magic starts every qcow2 image.
const qcow2Magic = "QFI\xfb"

// DiskFormat tells a qcow2 image ("qcow2") from a raw disk ("raw": anything else whose size is a
// whole number of 512-byte sectors), and refuses other files, and a qcow2 image that names
// another file (checkQcow2). Errors start with the path.
func DiskFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	format, err := diskFormat(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return format, nil
}

// diskFormat is DiskFormat of an open file, with errors that name no path.
func diskFormat(f *os.File) (string, error) {
	head := make([]byte, qcow2Header)
	n, _ := io.ReadFull(f, head)
	if n >= len(qcow2Magic) && string(head[:len(qcow2Magic)]) == qcow2Magic {
		return "qcow2", checkQcow2(head[:n])
	}
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.Size() == 0 || st.Size()%512 != 0 {
		return "", fmt.Errorf("not a disk image: not qcow2, and its %d bytes are not whole 512-byte sectors of a raw disk", st.Size())
	}
	return "raw", nil
}

// The fields of a qcow2 header (QEMU's docs/interop/qcow2.txt) that name other files: a
// backing file, and from version 3 an external data file (incompatible feature bit 2).
const (
	qcow2Header         = 80 // bytes read: up to incompatible_features
	qcow2ExternalData   = 1 << 2
	qcow2BackingOffset  = 8
	qcow2Incompatible   = 72
	qcow2VersionOffset  = 4
	qcow2MinHeaderBytes = 72
)

// checkQcow2 refuses a qcow2 image that reads another file: a backing file (which may be any
// file or device of the machine) or an external data file. Its version must be 2 or 3.
func checkQcow2(head []byte) error {
	if len(head) < qcow2MinHeaderBytes {
		return fmt.Errorf("a qcow2 header of %d bytes is cut short", len(head))
	}
	switch v := binary.BigEndian.Uint32(head[qcow2VersionOffset:]); {
	case v != 2 && v != 3:
		return fmt.Errorf("qcow2 version %d (want 2 or 3)", v)
	case binary.BigEndian.Uint64(head[qcow2BackingOffset:]) != 0:
		return fmt.Errorf("a qcow2 image with a backing file: an image must hold all its data (make one with `qemu-img convert -O qcow2 IMAGE FLAT`)")
	case v == 3 && len(head) >= qcow2Header && binary.BigEndian.Uint64(head[qcow2Incompatible:])&qcow2ExternalData != 0:
		return fmt.Errorf("a qcow2 image with an external data file: an image must hold all its data (make one with `qemu-img convert -O qcow2 IMAGE FLAT`)")
	}
	return nil
}
