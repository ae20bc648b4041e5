package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/bench"
	"github.com/trellisnet/trellis/internal/bench/setup"
)

// trellis-bench with an unknown part or setup fails before it creates anything (not even the
// state directory or the output directory), naming the known ones.
func TestBenchUnknownNames(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantErr error
		wantIn  string
	}{
		{[]string{"--parts", "nosuch"}, bench.ErrUnknownPart, "known: " + strings.Join(bench.AllParts, ", ")},
		{[]string{"--parts", "forward,nosuch"}, bench.ErrUnknownPart, `"nosuch"`},
		{[]string{"--setups", "native,bridges"}, setup.ErrUnknownSetup, "known: " + strings.Join(setup.Names(), ", ")},
		{[]string{"--parts", "forward", "--trellis", "/nonexistent/trellis"}, os.ErrNotExist, "--trellis: "},
		{[]string{"--parts", "delay", "--delay-rates", "1mbit,fast"}, bench.ErrOptions, `--delay-rates: "fast"`},
		{[]string{"--parts", "delay", "--delay-frames", "20"}, bench.ErrOptions, "--delay-frames: "},
	} {
		dir := t.TempDir()
		state, out := filepath.Join(dir, "state"), filepath.Join(dir, "out")
		root := newRoot()
		var stdout bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stdout)
		root.SetArgs(append([]string{"--state-dir", state, "--out", out}, c.args...))
		err := root.Execute()
		if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.wantIn) {
			t.Errorf("trellis-bench %v: %v, want %v naming %s", c.args, err, c.wantErr, c.wantIn)
		}
		for _, d := range []string{state, out} {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("trellis-bench %v made %s", c.args, d)
			}
		}
	}
}

// --delay-rates and --delay-frames set the delay part's rows over --quick's and the full run's.
func TestBenchDelayFlags(t *testing.T) {
	for _, c := range []struct {
		args   []string
		rates  []string
		frames int
	}{
		{nil, []string{"1mbit", "10mbit", "100mbit"}, 1000},
		{[]string{"--quick"}, []string{"10mbit"}, 200},
		{[]string{"--quick", "--delay-rates", "1mbit,100mbit"}, []string{"1mbit", "100mbit"}, 200},
		{[]string{"--delay-rates", "100mbit", "--delay-frames", "500"}, []string{"100mbit"}, 500},
	} {
		var bf benchFlags
		root := newRoot()
		f := root.Flags()
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		bf.quick, _ = f.GetBool("quick")
		bf.delayRates, _ = f.GetString("delay-rates")
		bf.delayFrames, _ = f.GetInt("delay-frames")
		opt, _, err := bf.options(f)
		if err != nil || !slices.Equal(opt.DelayRates, c.rates) || opt.DelayFrames != c.frames {
			t.Errorf("trellis-bench %v: rates %v, frames %d, %v; want %v, %d", c.args, opt.DelayRates, opt.DelayFrames, err, c.rates, c.frames)
		}
	}
}

// The trellis binary the bench runs: --trellis, else trellis beside trellis-bench, else on
// PATH; none is an error that says how to build it.
func TestLookTrellis(t *testing.T) {
	dir := t.TempDir()
	mk := func(path string, mode os.FileMode) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	given := mk(filepath.Join(dir, "given", "trellis"), 0o755)
	beside := mk(filepath.Join(dir, "bin", "trellis"), 0o755)
	onPath := mk(filepath.Join(dir, "path", "trellis"), 0o755)
	notExec := mk(filepath.Join(dir, "noexec", "trellis"), 0o644)
	empty := filepath.Join(dir, "empty")
	for _, c := range []struct {
		name, flag, dir, path string
		want                  string
		wantErr               string
	}{
		{"flag first", given, filepath.Dir(beside), filepath.Dir(onPath), given, ""},
		{"beside before PATH", "", filepath.Dir(beside), filepath.Dir(onPath), beside, ""},
		{"PATH last", "", empty, filepath.Dir(onPath), onPath, ""},
		{"not executable beside", "", filepath.Dir(notExec), empty, "", "no trellis binary beside trellis-bench"},
		{"flag not executable", notExec, filepath.Dir(beside), filepath.Dir(onPath), "", "--trellis: " + notExec + " is not an executable file"},
		{"none", "", empty, empty, "", "go build -o bin/trellis ./cmd/trellis"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PATH", c.path)
			got, err := lookTrellis(c.flag, c.dir)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("lookTrellis: %q, %v; want an error naming %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("lookTrellis: %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
