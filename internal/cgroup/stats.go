package cgroup

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Stats is what a node's group says of it.
type Stats struct {
	CPU       time.Duration // CPU time used by every process of the node, since it started
	Memory    uint64        // bytes in use, page cache and tmpfs files included
	Processes int64         // processes and threads
	OOMKills  int64         // processes the kernel killed for the group's memory limit
}

// Stats reads the group's counters, through descriptors kept open between calls (files.go).
func (g *Group) Stats() (Stats, error) {
	var s Stats
	if g.h.V2 != "" {
		dir := g.dirs[""]
		cpu, err := readKept(dir, "cpu.stat")
		if err != nil {
			return s, err
		}
		s.CPU = time.Duration(field(cpu, "usage_usec")) * time.Microsecond
		s.Memory = uint64(number(readKept(dir, "memory.current")))
		s.Processes = number(readKept(dir, "pids.current"))
		events, _ := readKept(dir, "memory.events")
		s.OOMKills = field(events, "oom_kill")
		return s, nil
	}
	usage, err := readKept(g.dirs["cpuacct"], "cpuacct.usage")
	if err != nil {
		g.forgetFiles() // a group gone from one hierarchy is gone from all
		return s, err
	}
	n, _ := strconv.ParseInt(usage, 10, 64)
	s.CPU = time.Duration(n)
	s.Memory = uint64(number(readKept(g.dirs["memory"], "memory.usage_in_bytes")))
	s.Processes = number(readKept(g.dirs["pids"], "pids.current"))
	oom, _ := readKept(g.dirs["memory"], "memory.oom_control")
	s.OOMKills = field(oom, "oom_kill")
	return s, nil
}

func number(s string, err error) int64 {
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// field returns the value of "key N" in a flat-keyed cgroup file.
func field(text, key string) int64 {
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// readKept reads a group's file through the process's kept descriptors.
func readKept(dir, file string) (string, error) { return files.read(filepath.Join(dir, file)) }

// forgetFiles closes the descriptors kept of the group's files, in every hierarchy.
func (g *Group) forgetFiles() {
	for _, dir := range g.dirs {
		files.evictDir(dir)
	}
}
