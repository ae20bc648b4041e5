package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// A network of 1000 nodes records about 1 MB of JSON, which takes longer to decode than most
// of what inspect does. LoadShared keeps the records it decoded while their files stay the
// same (Save replaces a file, so a saved record is a new file).

// maxShared bounds the records kept.
const maxShared = 16

// sharedRecord is a decoded record and the file it came from.
type sharedRecord struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
	rec      *Record
}

var shared = struct {
	sync.Mutex
	recs map[string]*sharedRecord // by path
}{recs: map[string]*sharedRecord{}}

// LoadShared is Load for readers that change nothing (inspect): the record it returns may be
// the one an earlier call returned, and must not be changed.
func (s *Store) LoadShared(name string) (*Record, error) {
	path := s.path(name)
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return s.Load(name)
	}
	key := sharedRecord{dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mtime: fi.ModTime()}
	shared.Lock()
	e := shared.recs[path]
	shared.Unlock()
	if e == nil || e.dev != key.dev || e.ino != key.ino || e.size != key.size || !e.mtime.Equal(key.mtime) {
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		key.rec = &Record{}
		if err := json.Unmarshal(data, key.rec); err != nil {
			return nil, fmt.Errorf("state record %s: %w", path, err)
		}
		if int64(len(data)) != key.size { // replaced between the stat and the read: keep nothing
			return s.withMark(name, key.rec), nil
		}
		e = &key
		shared.Lock()
		if len(shared.recs) >= maxShared {
			for p := range shared.recs {
				delete(shared.recs, p)
				break
			}
		}
		shared.recs[path] = e
		shared.Unlock()
	}
	return s.withMark(name, e.rec), nil
}

// withMark returns r, or a copy of it with status Changing if a change of the network was
// interrupted (as Load says it).
func (s *Store) withMark(name string, r *Record) *Record {
	if _, err := os.Stat(s.markPath(name)); err == nil && r.Status == Up {
		c := *r
		c.Status = Changing
		return &c
	}
	return r
}
