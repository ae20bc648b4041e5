package image

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/trellisnet/trellis/internal/pkgfiles"
)

// Where Debian's frr package puts FRR.
var (
	frrDaemons = "/usr/lib/frr"                          // daemons, watchfrr, frrinit.sh and frrcommon.sh
	frrModules = "/usr/lib/x86_64-linux-gnu/frr/modules" // what daemons load with -M
	frrEtc     = "/etc/frr"                              // the package's defaults: daemons, frr.conf, vtysh.conf
	frrVtysh   = "/usr/bin/vtysh"
	// frrPAM are the PAM services vtysh goes through: frr authenticates its user, and other
	// (the fall-back) checks the account.
	frrPAM = []string{"/etc/pam.d/frr", "/etc/pam.d/other"}
	// frrTools are what frrcommon.sh runs that busybox lacks.
	frrTools = []string{"/usr/bin/install"}
	// pamModules is where libpam looks for a module named without a path.
	pamModules = "/lib/x86_64-linux-gnu/security"
	// frrUsers and frrGroups are the accounts the package makes, which its daemons drop to and
	// frrinit.sh gives their files to.
	frrUsers  = []string{"frr"}
	frrGroups = []string{"frr", "frrvty"}
	hostEtc   = "/etc" // where the host's passwd and group are
)

// ErrNoFRR is returned when an image is to hold FRR and the host has none.
var ErrNoFRR = errors.New("FRR is not installed on this machine")

// frr adds the host's FRR as Debian installs it, so that stock FRR runs in the guest as on a
// router (`/usr/lib/frr/frrinit.sh start`, then vtysh): every daemon and module with their
// libraries (FRR's own libfrr through the daemons' RUNPATH), the init scripts (not the Python
// tools: the guest has no Python), vtysh, /etc/frr as the package installed it, and the frr user
// and the frr and frrvty groups with the host's ids.
func (c *collection) frr() error {
	names, err := os.ReadDir(frrDaemons)
	if err != nil || !exists(filepath.Join(frrDaemons, "zebra")) || !exists(frrVtysh) {
		return fmt.Errorf("image: %w (no %s/zebra or %s): install Debian's frr package (scripts/setup.sh does)", ErrNoFRR, frrDaemons, frrVtysh)
	}
	for _, d := range names {
		p := filepath.Join(frrDaemons, d.Name())
		if err := c.executable(p); err != nil {
			return err
		}
	}
	mods, _ := filepath.Glob(filepath.Join(frrModules, "*.so"))
	for _, m := range mods {
		if err := c.program(m); err != nil {
			return err
		}
	}
	for _, p := range append([]string{frrVtysh}, frrTools...) {
		if err := c.program(p); err != nil {
			return err
		}
	}
	for _, p := range frrPAM {
		if err := c.pam(p); err != nil {
			return err
		}
	}
	if err := c.packagedEtc(); err != nil {
		return err
	}
	users, err := accounts(filepath.Join(hostEtc, "passwd"), frrUsers)
	if err != nil {
		return err
	}
	groups, err := accounts(filepath.Join(hostEtc, "group"), frrGroups)
	if err != nil {
		return err
	}
	c.users, c.groups = append(c.users, users...), append(c.groups, groups...)
	return nil
}

// pam adds a PAM service's configuration, the files it includes and the modules it names.
// Without them vtysh, which authenticates its user first, says "Failure to initialize pam"
// and exits without running a command; without the account checks of "other" it says that the
// account failed after each command.
func (c *collection) pam(service string) error {
	if _, ok := c.files[service]; ok {
		return nil
	}
	data, err := os.ReadFile(service)
	if err != nil {
		return fmt.Errorf("image: %w (the frr package installs it): reinstall frr", err)
	}
	if err := c.copy(service, service, 0o644); err != nil {
		return err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimLeft(line, "-"))
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "@include" && len(f) > 1:
			if err := c.pam(filepath.Join(filepath.Dir(service), f[1])); err != nil {
				return err
			}
		case len(f) >= 3:
			mod := f[2]
			if strings.HasPrefix(f[1], "[") { // a control of [value=action ...]: the module follows "]"
				_, after, _ := strings.Cut(line, "]")
				if fs := strings.Fields(after); len(fs) > 0 {
					mod = fs[0]
				}
			}
			if !filepath.IsAbs(mod) {
				mod = filepath.Join(pamModules, mod)
			}
			if err := c.program(mod); err != nil {
				return err
			}
		}
	}
	return nil
}

// executable adds an ELF program with its libraries, or a script whose interpreter the image
// has; anything else (a Python tool, a directory) is left out.
func (c *collection) executable(path string) error {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	if f, err := elf.Open(path); err == nil {
		f.Close()
		return c.program(path)
	}
	head := make([]byte, 128)
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	n, _ := fh.Read(head)
	fh.Close()
	line, _, _ := bytes.Cut(head[:n], []byte("\n"))
	interp, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return nil
	}
	fields := strings.Fields(string(interp))
	if len(fields) == 0 {
		return nil
	}
	if _, ok := c.files[fields[0]]; !ok {
		return nil
	}
	return c.copy(path, path, st.Mode().Perm())
}

// packagedEtc adds /etc/frr with the files in it that are as the frr package installed them
// (daemons, frr.conf, vtysh.conf), with their owners and modes: a file the host's administrator
// changed is the host's, not a guest's, and may hold its secrets (docs/security.md).
func (c *collection) packagedEtc() error {
	st, err := os.Stat(frrEtc)
	if err != nil || !st.IsDir() {
		return fmt.Errorf("image: %w (no %s directory): reinstall frr", ErrNoFRR, frrEtc)
	}
	sys := st.Sys().(*syscall.Stat_t)
	c.add(&entry{path: frrEtc, dir: true, mode: st.Mode().Perm(), uid: int(sys.Uid), gid: int(sys.Gid)})
	sums, err := pkgfiles.Read()
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	etc, _ := os.ReadDir(frrEtc)
	for _, f := range etc {
		if e := packaged(filepath.Join(frrEtc, f.Name()), sums); e != nil {
			c.add(e)
		}
	}
	return nil
}

// packaged returns the entry of a regular file as its package installed it, or nil.
func packaged(path string, sums pkgfiles.Sums) *entry {
	in, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(in)
	if err != nil || !sums.Unchanged(path, data) {
		return nil
	}
	sys := st.Sys().(*syscall.Stat_t)
	return &entry{path: path, content: string(data), mode: st.Mode().Perm(), uid: int(sys.Uid), gid: int(sys.Gid)}
}

// accounts returns the lines of a passwd or group file for names, in that order.
func accounts(file string, names []string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	found := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), ":")
		found[name] = sc.Text()
	}
	var out []string
	for _, n := range names {
		line, ok := found[n]
		if !ok {
			return nil, fmt.Errorf("image: %w: %s has no %s (the frr package makes it): reinstall frr", ErrNoFRR, file, n)
		}
		out = append(out, line)
	}
	return out, sc.Err()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
