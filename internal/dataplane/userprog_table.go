package dataplane

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
)

// Table describes one map of a node's program.
type Table struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	KeySize    uint32 `json:"key_size"`
	ValueSize  uint32 `json:"value_size"`
	MaxEntries uint32 `json:"max_entries"`
	ReadOnly   bool   `json:"read_only,omitempty"` // trellis's own (trellis.h): `trellis table` does not write it
}

// Entry is one key and its value, as bytes.
type Entry struct {
	Key   []byte
	Value []byte
}

// Tables lists the program's maps, by name.
func (u *UserProgram) Tables() []Table {
	var out []Table
	for name, m := range u.maps {
		out = append(out, Table{Name: name, Type: m.Type().String(), KeySize: m.KeySize(), ValueSize: m.ValueSize(),
			MaxEntries: m.MaxEntries(), ReadOnly: readOnlyTable(name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func readOnlyTable(name string) bool { return name == userPortsMap || name == userPortOfMap }

// table returns map name, checking that a key (and a value, if not nil) have its sizes.
func (u *UserProgram) table(name string, key, value []byte, write bool) (*ebpf.Map, error) {
	m := u.maps[name]
	if m == nil {
		var names []string
		for n := range u.maps {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%w %q: the program's tables are %s", ErrNoTable, name, strings.Join(names, ", "))
	}
	if write && readOnlyTable(name) {
		return nil, fmt.Errorf("%w: table %s is trellis's own (the port numbers): it is read-only", ErrReadOnly, name)
	}
	if t := m.Type(); t == ebpf.PerCPUArray || t == ebpf.PerCPUHash || t == ebpf.LRUCPUHash || t == ebpf.PerCPUCGroupStorage {
		return nil, fmt.Errorf("%w: table %s is a per-CPU map (%s): not readable through trellis table yet", ErrProgram, name, m.Type())
	}
	if key != nil && uint32(len(key)) != m.KeySize() {
		return nil, fmt.Errorf("%w: table %s: the key is %d bytes, the table's keys are %d", ErrEntrySize, name, len(key), m.KeySize())
	}
	if value != nil && uint32(len(value)) != m.ValueSize() {
		return nil, fmt.Errorf("%w: table %s: the value is %d bytes, the table's values are %d", ErrEntrySize, name, len(value), m.ValueSize())
	}
	return m, nil
}

// Get returns the value of key in table name (ErrNoEntry if the table has no such key).
func (u *UserProgram) Get(name string, key []byte) ([]byte, error) {
	m, err := u.table(name, key, nil, false)
	if err != nil {
		return nil, err
	}
	v, err := m.LookupBytes(key)
	if err != nil {
		return nil, fmt.Errorf("dataplane: table %s: %w", name, err)
	}
	if v == nil {
		return nil, fmt.Errorf("table %s: %w for key %s", name, ErrNoEntry, hex.EncodeToString(key))
	}
	return v, nil
}

// Set writes key's value in table name.
func (u *UserProgram) Set(name string, key, value []byte) error {
	m, err := u.table(name, key, value, true)
	if err != nil {
		return err
	}
	if err := m.Put(key, value); err != nil {
		return fmt.Errorf("dataplane: table %s: %w", name, err)
	}
	return nil
}

// Delete removes key from table name (ErrNoEntry if it was not there).
func (u *UserProgram) Delete(name string, key []byte) error {
	m, err := u.table(name, key, nil, true)
	if err != nil {
		return err
	}
	if err := m.Delete(key); errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("table %s: %w for key %s", name, ErrNoEntry, hex.EncodeToString(key))
	} else if err != nil {
		return fmt.Errorf("dataplane: table %s: %w", name, err)
	}
	return nil
}

// Dump returns every entry of table name.
func (u *UserProgram) Dump(name string) ([]Entry, error) {
	m, err := u.table(name, nil, nil, false)
	if err != nil {
		return nil, err
	}
	var out []Entry
	var k, v []byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		out = append(out, Entry{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("dataplane: table %s: %w", name, err)
	}
	return out, nil
}
