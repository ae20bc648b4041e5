package pki

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClientConfigErrors checks that bad certificate files give errors naming the file.
func TestClientConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	os.WriteFile(caFile, ca.PEM, 0o644)
	old, err := ca.Issue("old", Client, nil, -time.Second) // expired a second ago
	if err != nil {
		t.Fatal(err)
	}
	oldCert, oldKey, _ := old.Write(dir, "old")
	garbage := filepath.Join(dir, "garbage.crt")
	os.WriteFile(garbage, []byte("not PEM"), 0o644)
	for _, tc := range []struct {
		name  string
		files Files
		want  string
	}{
		{"missing key", Files{CA: caFile, Cert: oldCert}, "are all needed"},
		{"CA not PEM", Files{CA: garbage, Cert: oldCert, Key: oldKey}, garbage},
		{"certificate not PEM", Files{CA: caFile, Cert: garbage, Key: oldKey}, garbage},
		{"expired", Files{CA: caFile, Cert: oldCert, Key: oldKey}, "expired"},
		{"no such CA file", Files{CA: filepath.Join(dir, "nope"), Cert: oldCert, Key: oldKey}, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.files.ClientConfig()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ClientConfig: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestLoadCA reads back a CA written with its key, and refuses files that are not one.
func TestLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca, _ := NewCA("ca", time.Hour)
	other, _ := NewCA("other", time.Hour)
	caCrt, caKey, otherKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), filepath.Join(dir, "other.key")
	os.WriteFile(caCrt, ca.PEM, 0o644)
	if err := ca.WriteKey(caKey); err != nil {
		t.Fatal(err)
	}
	other.WriteKey(otherKey)
	leaf, _ := ca.Issue("alice", Client, nil, time.Hour)
	leafCrt, leafKey, _ := leaf.Write(dir, "alice")
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"good", caCrt, caKey, ""},
		{"key of another CA", caCrt, otherKey, "does not belong"},
		{"not a CA", leafCrt, leafKey, "not a CA certificate"},
		{"key not PEM", caCrt, caCrt, "not an EC private key"},
		{"no such file", filepath.Join(dir, "nope"), caKey, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadCA(tc.cert, tc.key)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := got.Issue("bob", Client, nil, time.Hour); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadCA: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Keys are written 0600 even over a file that was there with a wider mode (a key made by
// hand, or a file another user put there to read the next key written into it).
func TestWriteKeyPrivate(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("alice", Client, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]func(path string) error{
		"alice.key": func(string) error { _, _, err := pair.Write(dir, "alice"); return err },
		"ca.key":    ca.WriteKey,
	}
	for name, write := range keys {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		held, err := os.Open(path) // what a reader that opened it before holds
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		if err := write(path); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", name, fi.Mode(), err)
		}
		if data, _ := io.ReadAll(held); string(data) != "old" {
			t.Errorf("%s: the key was written into the file that was there, which others may hold open", name)
		}
		if leftovers, _ := filepath.Glob(filepath.Join(dir, "."+name+".*")); len(leftovers) > 0 {
			t.Errorf("%s: temporary files left: %v", name, leftovers)
		}
	}
}
