package dataplane

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// The operations on a node's tables that `trellis table`, the HTTP API and the table socket
// inside the node (internal/tablesock) offer, with keys and values written in hex.

// Table operations (TableRequest.Op).
const (
	OpTables = "tables" // list the tables
	OpDump   = "dump"   // every entry of a table
	OpGet    = "get"    // the value of a key
	OpSet    = "set"    // write a key's value
	OpDel    = "del"    // remove a key
)

// TableRequest is one operation on a node's tables; Key and Value in hex (ParseHex).
type TableRequest struct {
	Op    string `json:"op"`              // OpTables, OpDump, OpGet, OpSet or OpDel
	Table string `json:"table,omitempty"` // all but OpTables
	Key   string `json:"key,omitempty"`   // OpGet, OpSet, OpDel
	Value string `json:"value,omitempty"` // OpSet
}

// HexEntry is one entry of a table, key and value in hex.
type HexEntry struct {
	Key   string `json:"key" example:"180000000a000200" doc:"the key's bytes in hex, in memory order"`
	Value string `json:"value" example:"02aabbccddee0200" doc:"the value's bytes in hex, in memory order"`
}

// TableReply is what an operation returns: the tables (tables), the entries (dump), or a
// value (get).
type TableReply struct {
	Tables  []Table    `json:"tables,omitempty"`
	Entries []HexEntry `json:"entries,omitempty"`
	Value   string     `json:"value,omitempty"`
}

// Do runs one operation on the program's tables. Bad hex, an unknown table, a key or value of
// the wrong size, or a write to a read-only table is refused before anything changes.
func (u *UserProgram) Do(r TableRequest) (*TableReply, error) {
	var key, value []byte
	var err error
	switch r.Op {
	case OpTables, OpDump:
	case OpGet, OpSet, OpDel:
		if key, err = ParseHex(r.Key); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		if r.Op == OpSet {
			if value, err = ParseHex(r.Value); err != nil {
				return nil, fmt.Errorf("value: %w", err)
			}
		}
	default:
		return nil, fmt.Errorf("%w %q: give tables, dump, get, set or del", ErrBadOp, r.Op)
	}
	out := &TableReply{}
	switch r.Op {
	case OpTables:
		out.Tables = u.Tables()
	case OpDump:
		entries, err := u.Dump(r.Table)
		if err != nil {
			return nil, err
		}
		out.Entries = make([]HexEntry, 0, len(entries))
		for _, e := range entries {
			out.Entries = append(out.Entries, HexEntry{Key: hex.EncodeToString(e.Key), Value: hex.EncodeToString(e.Value)})
		}
	case OpGet:
		v, err := u.Get(r.Table, key)
		if err != nil {
			return nil, err
		}
		out.Value = hex.EncodeToString(v)
	case OpSet:
		err = u.Set(r.Table, key, value)
	case OpDel:
		err = u.Delete(r.Table, key)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ParseHex reads bytes written in hex, with an optional 0x and separators (. : - _ space).
func ParseHex(s string) ([]byte, error) {
	clean := strings.NewReplacer(".", "", ":", "", "-", "", "_", "", " ", "").Replace(strings.TrimPrefix(s, "0x"))
	b, err := hex.DecodeString(clean)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("%q is %w: write each byte as two hex digits, e.g. 0a000201 or 0a:00:02:01", trimmed(s), ErrBadHex)
	}
	return b, nil
}

// trimmed shortens s for an error message.
func trimmed(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
