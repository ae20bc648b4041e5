package pki

import (
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
