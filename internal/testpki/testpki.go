// Package testpki makes a throw-away public-key infrastructure for tests
// of TLS connections: a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, as PEM files in the test's temporary directory,
// and more certificates on demand ([PKI.Issue]).
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and the certificates it signed, valid for an hour.
type PKI struct {
	CAFile     string         // the CA certificate (PEM)
	Pool       *x509.CertPool // the CA
	ServerTLS  *tls.Config    // a server certificate for 127.0.0.1, TLS 1.2 or later
	ClientCert string         // a client certificate (PEM file) for mutual TLS
	ClientKey  string         // and its key

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// Leaf describes a certificate for [PKI.Issue].
type Leaf struct {
	Serial   int64
	Name     string    // the subject's common name
	Client   bool      // a client certificate; else a server certificate for 127.0.0.1 and localhost
	DNS      []string  // more names of a server certificate
	NotAfter time.Time // zero: an hour from now
}

// Issue returns a new certificate signed by the CA, and its private key,
// as PEM.
func (p *PKI) Issue(t testing.TB, l Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(l.Serial), Subject: pkix.Name{CommonName: l.Name},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: l.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: append([]string{"localhost"}, l.DNS...),
	}
	if l.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(time.Hour)
	}
	if l.Client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses, tmpl.DNSNames = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// New makes a PKI; it fails t on any error.
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "streamer test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{ca: ca, caKey: caKey}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvCert, srvKey := p.Issue(t, Leaf{Serial: 2, Name: "broker"})
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey := p.Issue(t, Leaf{Serial: 3, Name: "streamer", Client: true})
	p.Pool = x509.NewCertPool()
	p.Pool.AddCert(ca)
	p.CAFile = write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	p.ServerTLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	p.ClientCert = write("client.pem", cliCert)
	p.ClientKey = write("client-key.pem", cliKey)
	return p
}
