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
