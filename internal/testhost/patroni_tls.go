package testhost

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// PatroniOptions change how Patroni starts.
type PatroniOptions struct {
	// TLS serves every member's REST API over HTTPS, with a certificate
	// of a CA made for the cluster by openssl, for the name "localhost"
	// only: connect_address says localhost, so a client checks the
	// certificate by that name while it connects to 127.0.0.1. Clients
	// must show a certificate of that CA (restapi.verify_client:
	// required); Patroni's members use theirs to ask each other.
	TLS bool
}

// PatroniTLSFiles are the CA and the one certificate every member serves
// and shows as a client (PEM files, readable by postgres only, but the CA).
type PatroniTLSFiles struct {
	CA, Cert, Key string
}

// makePatroniTLS makes a CA and a certificate for localhost signed by it.
func makePatroniTLS(t testing.TB, dir string) *PatroniTLSFiles {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &PatroniTLSFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "member.crt"), Key: filepath.Join(dir, "member.key")}
	ext := filepath.Join(dir, "member.ext")
	if err := os.WriteFile(ext, []byte("subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	for _, args := range [][]string{
		append(append([]string{"req", "-x509"}, ec...), "-keyout", filepath.Join(dir, "ca.key"), "-out", f.CA, "-days", "2", "-subj", "/CN=pgtune test CA"),
		append(append([]string{"req"}, ec...), "-keyout", f.Key, "-out", filepath.Join(dir, "member.csr"), "-subj", "/CN=localhost"),
		{"x509", "-req", "-in", filepath.Join(dir, "member.csr"), "-CA", f.CA, "-CAkey", filepath.Join(dir, "ca.key"),
			"-CAcreateserial", "-out", f.Cert, "-days", "2", "-extfile", ext},
	} {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("testhost: openssl %v: %v: %s", args, err, out)
		}
	}
	chown(t, "postgres", f.Cert, f.Key)
	if err := os.Chmod(f.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// restAPIConfig is the restapi section's TLS lines (indented for it).
func (f *PatroniTLSFiles) restAPIConfig() string {
	if f == nil {
		return ""
	}
	return "  certfile: " + f.Cert + "\n  keyfile: " + f.Key + "\n  cafile: " + f.CA + "\n  verify_client: required\n"
}

// client is an HTTP client that checks the members' certificate against
// the CA and shows the member certificate.
func (f *PatroniTLSFiles) client(t testing.TB) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("testhost: %s holds no certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
}
