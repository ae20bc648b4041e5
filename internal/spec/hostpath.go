package spec

import (
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// A topology file a client sends to the API over TCP names no path on the server's machine:
// the server runs as root, and would read for the client what the client itself may not read
// (docs/security.md, "A local unprivileged user"). The client sends the files' contents
// instead (`content:`). These keys name such a path, and are refused in a sent file before
// anything on the disk is looked at: `files: source:`, `rootfs:`, and a VM's `kernel`,
// `initrd` and `disk` (in a cluster these three are names of the machines' image store, not
// paths, and a sent file may give them: images.go and kinds/vm).

// ParseSent parses and validates a topology file that a client of the API sent (cluster: for
// a cluster, as ParseCluster): as Parse, but every key that names a path on this machine is a
// problem, and no file of the machine is read.
func ParseSent(file string, data []byte, cluster bool) (*Network, error) {
	return (&parser{file: file, cluster: cluster, sent: true}).parse(data)
}

// hostPath records, in a sent file, that the key at v names a path on the server's machine,
// and tells whether it did; fix says what to write instead.
func (p *parser) hostPath(v *yaml.Node, field, fix string) bool {
	if !p.sent {
		return false
	}
	if !p.cluster {
		fix += "; or run `trellis up FILE` as root on the machine"
	}
	p.fail(v, field, "names a path on the server's machine, which a file sent to the API may not: the server would read it as root for the client", fix)
	return true
}

// besideFile is path, or, if it is relative, path in the topology file's directory.
func (p *parser) besideFile(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(filepath.Dir(p.file), path)
}
