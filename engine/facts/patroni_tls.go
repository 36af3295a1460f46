package facts

import (
	"encoding/json"
	"fmt"
	"strings"
)

// PatroniTLS is how pgtune checks a member's REST API over HTTPS, read
// from patroni.yml as patronictl reads it: the CA is ctl.cacert, else
// restapi.cafile (neither: the host's default trust store); ctl.insecure
// turns the check off (pgtune says so in its plan); a client certificate
// (ctl.certfile/keyfile, else restapi's own) is sent when
// restapi.verify_client asks for one.
//
// The certificate is checked against the host name of the API's URL,
// which is the one restapi.connect_address (else listen) gives: the name
// the member's peers and patronictl connect to, so the one its
// certificate must carry. pgtune connects only to the addresses that name
// resolves to on the host and that are proven local (PatroniLocalPy);
// the name is used for the certificate check (and SNI) alone.
type PatroniTLS struct {
	CAFile   string `json:"ca_file,omitempty"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
}

// restAPITLS reads the TLS settings of an HTTPS REST API; a setting pgtune
// cannot honour is an error that says which.
func restAPITLS(c patroniConfig) (*PatroniTLS, error) {
	insecure, err := yamlTrue("ctl.insecure", c.Ctl.Insecure)
	if err != nil {
		return nil, err
	}
	t := &PatroniTLS{CAFile: firstSet(c.Ctl.CACert, c.RestAPI.CAFile), Insecure: insecure}
	switch v := strings.ToLower(c.RestAPI.VerifyClient); v {
	case "", "none":
	case "required", "optional":
		t.CertFile = firstSet(c.Ctl.CertFile, c.RestAPI.CertFile)
		t.KeyFile = firstSet(c.Ctl.KeyFile, c.RestAPI.KeyFile)
		if firstSet(c.Ctl.KeyFilePassword, c.RestAPI.KeyFilePassword) != "" {
			return nil, fmt.Errorf("restapi.verify_client is %s and the client key is encrypted (keyfile_password): pgtune does not pass key passwords; give ctl a key without one (ctl.certfile, ctl.keyfile)", v)
		}
	default:
		return nil, fmt.Errorf("restapi.verify_client %q is none of none, optional, required", c.RestAPI.VerifyClient)
	}
	for _, f := range []struct{ key, path string }{{"CA", t.CAFile}, {"certificate", t.CertFile}, {"key", t.KeyFile}} {
		if f.path != "" && !strings.HasPrefix(f.path, "/") {
			return nil, fmt.Errorf("the REST API's %s file %q is not an absolute path", f.key, f.path)
		}
	}
	return t, nil
}

// yamlTrue reads a YAML boolean; anything else but unset is an error
// (Python would take the string "false" as true).
func yamlTrue(key string, v any) (bool, error) {
	switch b := v.(type) {
	case nil:
		return false, nil
	case bool:
		return b, nil
	}
	return false, fmt.Errorf("%s is %v, not true or false", key, v)
}

func firstSet(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// PyArg is the TLS settings as the REST helpers' argument (JSON; "{}"
// over plain HTTP).
func (t *PatroniTLS) PyArg() string {
	if t == nil {
		return "{}"
	}
	b, _ := json.Marshal(map[string]any{"cafile": t.CAFile, "certfile": t.CertFile, "keyfile": t.KeyFile, "insecure": t.Insecure})
	return string(b)
}
