// Package pki makes the certificates a trellis cluster runs on (docs/design.md, decision 10:
// TLS between everything; docs/cluster.md, "Certificates"): certificate authorities, and
// certificates they sign, each for only the usages its holder needs: a client (an identity:
// etcd takes a client's user from its certificate's common name), a server (an etcd member's
// client port, the API), or both for an etcd member's peer port (signed by a CA of the peers
// alone) and an agent (its identity, and the server of its endpoint). Keys are ECDSA P-256;
// everything is PEM.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ErrBadPEM is returned for PEM data that holds no certificate or key of the kind expected.
var ErrBadPEM = errors.New("pki: bad PEM")

// CA is a certificate authority: its certificate, and its key to sign with.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the certificate, PEM-encoded
}

// Pair is a signed certificate and its key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// Usage says what a certificate may be used for.
type Usage int

const (
	Client Usage = 1 << iota // a TLS client: agents, the placer, tenants, the administrator
	Server                   // a TLS server: etcd members' client ports, agents' endpoints, the API
	// Peer is an etcd member's certificate for its peer port, where each member is the
	// server of the others and their client.
	Peer = Client | Server
)

// NewCA makes a self-signed certificate authority named name, valid for validFor.
func NewCA(name string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(name, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a certificate for common name cn, for the usages given, valid for validFor.
// hosts (names or IP addresses) go into the subject alternative names of a server certificate.
func (ca *CA) Issue(cn string, usage Usage, hosts []string, validFor time.Duration) (*Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(cn, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if usage&Client != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if usage&Server != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// template is the part every certificate shares. NotBefore is a minute back, so that machines
// whose clocks differ a little accept a certificate just made.
func template(cn string, validFor time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"trellis"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validFor),
	}, nil
}

// Write writes the pair as DIR/NAME.crt and DIR/NAME.key (the key mode 0600) and returns
// their paths.
func (p *Pair) Write(dir, name string) (cert, key string, err error) {
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(cert, p.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := writeKey(key, p.KeyPEM); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

// writeKey writes a private key to path as a new file of mode 0600 that replaces any file
// there: writing into an existing file would keep its mode (a key made 0644 by hand, or a file
// another user made there to read it).
func writeKey(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // 0600
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Files names the PEM files a TLS client of the cluster uses.
type Files struct {
	CA, Cert, Key string
}

// ClientConfig reads the files into a TLS configuration for a client that checks the server
// against the CA and presents its own certificate. Errors name the file that is wrong.
func (f Files) ClientConfig() (*tls.Config, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("pki: a CA certificate, a certificate and a key are all needed (have %q, %q, %q)", f.CA, f.Cert, f.Key)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: %s holds no certificate", ErrBadPEM, f.CA)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s with key %s: %v", ErrBadPEM, f.Cert, f.Key, err)
	}
	if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil && time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("pki: certificate %s expired at %s; issue a new one", f.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// LoadCA reads a certificate authority from its certificate and key files (PEM), to issue
// certificates with (trellis tenant add). Errors name the file that is wrong.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: %s holds no certificate", ErrBadPEM, certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadPEM, certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("pki: %s is not a CA certificate; give the CA that signed etcd's certificates", certFile)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%w: %s holds no key", ErrBadPEM, keyFile)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not an EC private key: %v", ErrBadPEM, keyFile, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("pki: key %s does not belong to CA certificate %s", keyFile, certFile)
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM}, nil
}

// WriteKey writes the CA's key as PEM to path, mode 0600 (a new cluster's CA, for LoadCA).
func (ca *CA) WriteKey(path string) error {
	der, err := x509.MarshalECPrivateKey(ca.Key)
	if err != nil {
		return err
	}
	return writeKey(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// ServerConfig reads the files into a TLS configuration for a server (an agent's endpoint) that
// presents its certificate and requires every client to present one the CA signed (mutual
// TLS); the handler finds the client's name in its certificate's common name.
func (f Files) ServerConfig() (*tls.Config, error) {
	tc, err := f.ClientConfig()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: tc.Certificates, ClientCAs: tc.RootCAs, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// Certificate parses the pair's certificate.
func (p *Pair) Certificate() (*x509.Certificate, error) {
	b, _ := pem.Decode(p.CertPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no certificate", ErrBadPEM)
	}
	return x509.ParseCertificate(b.Bytes)
}

// Fingerprint is the SHA-256 of a certificate (its DER), in hex: what a tenant's record keeps
// to tell the certificate issued for it from any other of the same name.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}
