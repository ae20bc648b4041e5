// Package state records, in a directory on the machine, which virtual networks trellis has
// created and what belongs to them, so that any of it can be found and removed again,
// even after trellis was killed half-way through (docs/design.md, decision 9).
package state

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/plan"
)

// DefaultDir is where state lives unless --state-dir says otherwise.
const DefaultDir = "/var/lib/trellis"

// Status of a network's record.
const (
	Creating = "creating" // written before the first kernel object; stays if up was killed
	Changing = "changing" // a live change is under way, or was interrupted
	Up       = "up"
)

// Record is what the state directory knows of one network.
type Record struct {
	Name    string
	NetID   string
	File    string // topology file it came from
	Status  string
	Created time.Time
	Plan    *plan.Plan     // what was last applied (for a new network: what is being created)
	Target  *plan.Plan     `json:",omitempty"` // what a live change under way is converging to
	Names   *plan.Names    // the device names allocated to the network's objects
	Nodes   map[string]int // node name -> pid of its init process
	// Starting are the nodes whose start commands an apply began and has not finished: if it
	// was interrupted, the next apply starts them again (a command list cannot be resumed).
	Starting []string `json:",omitempty"`
}

// ErrBusy is returned by Lock when another trellis command holds the network's lock.
var ErrBusy = errors.New("is being changed by another trellis command")

// Store is a state directory.
type Store struct {
	Dir string
	ID  string // random, made once per directory; scopes names and process markers
}

// Open opens the state directory dir, making it if need be (makePrivate).
func Open(dir string) (*Store, error) {
	if err := makePrivate(dir); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	for _, d := range []string{filepath.Join(dir, "networks"), filepath.Join(dir, "logs")} {
		if err := os.Mkdir(d, DirMode); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	idFile := filepath.Join(dir, "id")
	id, err := os.ReadFile(idFile)
	if errors.Is(err, os.ErrNotExist) {
		b := make([]byte, 4)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		id = []byte(hex.EncodeToString(b))
		err = writeAtomic(idFile, id)
	}
	if err != nil {
		return nil, fmt.Errorf("state directory id: %w", err)
	}
	return &Store{Dir: dir, ID: strings.TrimSpace(string(id))}, nil
}

func (s *Store) path(name string) string {
	return filepath.Join(s.Dir, "networks", name+".json")
}

func (s *Store) lockPath(name string) string {
	return filepath.Join(s.Dir, "networks", name+".lock")
}

// LogDir is where the output of a network's node commands goes.
func (s *Store) LogDir(name string) string {
	return filepath.Join(s.Dir, "logs", name)
}

// Load returns the record of network name, or nil if there is none.
func (s *Store) Load(name string) (*Record, error) {
	data, err := os.ReadFile(s.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("state record %s: %w", s.path(name), err)
	}
	if _, err := os.Stat(s.markPath(name)); err == nil && r.Status == Up {
		r.Status = Changing
	}
	return &r, nil
}

// Save writes a record atomically: a crash leaves the old or the new one, never half.
func (s *Store) Save(r *Record) error {
	data, err := json.Marshal(r) // compact: a network of 1000 nodes records about 1 MB
	if err != nil {
		return err
	}
	if err := writeAtomic(s.path(r.Name), data); err != nil {
		return err
	}
	if r.Status == Up {
		if err := os.Remove(s.markPath(r.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// MarkChanging notes that a change of network name is under way, without rewriting its
// record: until the next Save of the network as up, Load gives its status as Changing.
func (s *Store) MarkChanging(name string) error {
	return os.WriteFile(s.markPath(name), nil, FileMode)
}

func (s *Store) markPath(name string) string {
	return filepath.Join(s.Dir, "networks", name+".changing")
}

// Delete removes a network's record, uid range, lock and logs.
func (s *Store) Delete(name string) error {
	if err := os.RemoveAll(s.LogDir(name)); err != nil {
		return err
	}
	if err := s.freeUIDs(name); err != nil {
		return err
	}
	for _, f := range []string{s.path(name), s.uidPath(name), s.markPath(name), s.lockPath(name)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// List returns every recorded network, by name.
func (s *Store) List() ([]*Record, error) {
	files, err := filepath.Glob(filepath.Join(s.Dir, "networks", "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []*Record
	for _, f := range files {
		r, err := s.Load(strings.TrimSuffix(filepath.Base(f), ".json"))
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Lock takes the lock of network name, so that two trellis commands never change one network
// at once. The kernel drops the lock if trellis dies. Call the returned function to release it.
func (s *Store) Lock(name string) (func(), error) {
	f, err := os.OpenFile(s.lockPath(name), os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("network %s %w", name, ErrBusy)
	}
	return func() { f.Close() }, nil
}

// LockMachine takes the lock of what the networks of this state directory share on the
// machine (the EGRE decapsulation program), waiting for it if need be.
func (s *Store) LockMachine() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, "machine.lock"), os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
