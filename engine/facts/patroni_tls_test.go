package facts

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
)

// testCA is a throwaway CA that issues certificates into dir.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{dir: dir, cert: cert, key: key, file: filepath.Join(dir, name+".pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue makes a leaf certificate for names (DNS names or IPs) and returns
// its certificate and key files.
func (ca *testCA) issue(t *testing.T, name string, names ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// patroniTLSServer is a Patroni-like API over HTTPS with the certificate
// certFile/keyFile, asking for a client certificate of clientCA when set.
func patroniTLSServer(t *testing.T, certFile, keyFile string, clientCA *testCA) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/patroni" {
			io.WriteString(w, `{"state":"running","role":"replica","patroni":{"scope":"demo","name":"n2"}}`)
			return
		}
		io.WriteString(w, `{"members":[{"name":"n2","role":"replica","state":"streaming","lag":0}]}`)
	}))
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		srv.TLS.ClientCAs, srv.TLS.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// Discovery over HTTPS checks the certificate: against the CA patroni.yml
// names and for the URL's host name (the connection still goes to the
// checked loopback address); a client certificate is sent when given;
// ctl.insecure skips the check. Anything else is refused with the reason
// and nothing is read.
func TestAskPatroniOverHTTPS(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	ca, other := newTestCA(t, dir, "ca"), newTestCA(t, dir, "other-ca")
	srvCert, srvKey := ca.issue(t, "server", "localhost", "127.0.0.1")
	nameOnly, nameOnlyKey := ca.issue(t, "name-only", "localhost")
	clientCert, clientKey := ca.issue(t, "client", "pgtune")
	strangerCert, strangerKey := other.issue(t, "stranger", "pgtune")
	plain := patroniTLSServer(t, srvCert, srvKey, nil)
	byName := patroniTLSServer(t, nameOnly, nameOnlyKey, nil)
	mutual := patroniTLSServer(t, srvCert, srvKey, ca)
	port := func(s *httptest.Server) string {
		return s.Listener.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):]
	}

	for _, tc := range []struct {
		name, url string
		tls       *PatroniTLS
		wantErr   string
	}{
		{"CA named, IP in the certificate", plain.URL, &PatroniTLS{CAFile: ca.file}, ""},
		{"host name checked, loopback connected", "https://localhost:" + port(byName), &PatroniTLS{CAFile: ca.file}, ""},
		{"IP not in a name-only certificate", byName.URL, &PatroniTLS{CAFile: ca.file}, "certificate verify failed"},
		{"another CA", plain.URL, &PatroniTLS{CAFile: other.file}, "certificate verify failed"},
		{"no CA named: the host's trust store", plain.URL, &PatroniTLS{}, "certificate verify failed"},
		{"CA file missing", plain.URL, &PatroniTLS{CAFile: filepath.Join(dir, "none.pem")}, "cannot be used: FileNotFoundError"},
		{"ctl.insecure", plain.URL, &PatroniTLS{Insecure: true}, ""},
		{"client certificate", mutual.URL, &PatroniTLS{CAFile: ca.file, CertFile: clientCert, KeyFile: clientKey}, ""},
		{"client certificate required, none sent", mutual.URL, &PatroniTLS{CAFile: ca.file}, "REST API over HTTPS"},
		{"client certificate of another CA", mutual.URL, &PatroniTLS{CAFile: ca.file, CertFile: strangerCert, KeyFile: strangerKey}, "REST API over HTTPS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &Patroni{Name: "n2", APIURL: tc.url, TLS: tc.tls}
			askPatroni(context.Background(), transport.NewLocal(), false, u.Username, p)
			if tc.wantErr == "" {
				if p.APIError != "" || p.Role != "replica" || len(p.Members) != 1 {
					t.Errorf("%+v", p)
				}
				return
			}
			if !strings.Contains(p.APIError, tc.wantErr) || !strings.Contains(p.APIError, `"n2"`) || p.Role != "" {
				t.Errorf("APIError %q, role %q; want a refusal naming n2 with %q", p.APIError, p.Role, tc.wantErr)
			}
		})
	}
}

// patroni.yml's TLS settings as patronictl reads them: ctl first, then
// restapi; settings pgtune cannot honour are errors.
func TestRestAPITLS(t *testing.T) {
	for _, tc := range []struct {
		name, yml string
		want      *PatroniTLS
		wantErr   string
	}{
		{"restapi.cafile", "restapi: {certfile: /s.crt, cafile: /ca.pem}", &PatroniTLS{CAFile: "/ca.pem"}, ""},
		{"ctl.cacert wins", "restapi: {certfile: /s.crt, cafile: /ca.pem}\nctl: {cacert: /ctl-ca.pem}", &PatroniTLS{CAFile: "/ctl-ca.pem"}, ""},
		{"insecure", "restapi: {certfile: /s.crt}\nctl: {insecure: true}", &PatroniTLS{Insecure: true}, ""},
		{"insecure as a string", "restapi: {certfile: /s.crt}\nctl: {insecure: 'false'}", nil, "ctl.insecure is false, not true or false"},
		{"client cert: restapi's own", "restapi: {certfile: /s.crt, keyfile: /s.key, cafile: /ca.pem, verify_client: required}",
			&PatroniTLS{CAFile: "/ca.pem", CertFile: "/s.crt", KeyFile: "/s.key"}, ""},
		{"client cert: ctl's", "restapi: {certfile: /s.crt, keyfile: /s.key, verify_client: Optional}\nctl: {certfile: /c.crt, keyfile: /c.key}",
			&PatroniTLS{CertFile: "/c.crt", KeyFile: "/c.key"}, ""},
		{"no client cert unless asked", "restapi: {certfile: /s.crt, keyfile: /s.key}", &PatroniTLS{}, ""},
		{"encrypted key", "restapi: {certfile: /s.crt, keyfile: /s.key, keyfile_password: x, verify_client: required}", nil, "keyfile_password"},
		{"bad verify_client", "restapi: {certfile: /s.crt, verify_client: always}", nil, "none of none, optional, required"},
		{"relative CA", "restapi: {certfile: /s.crt, cafile: ca.pem}", nil, "not an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Patroni{ConfigFile: "/etc/patroni.yml"}
			yml := strings.Replace(tc.yml, "restapi: {", "restapi: {listen: '127.0.0.1:8008', ", 1)
			_, err := p.readConfig([]byte("postgresql: {data_dir: /d}\n"+yml+"\n"), "/d")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *p.TLS != *tc.want || !strings.HasPrefix(p.APIURL, "https://") {
				t.Errorf("TLS %+v at %s, want %+v over https", *p.TLS, p.APIURL, *tc.want)
			}
		})
	}
}
