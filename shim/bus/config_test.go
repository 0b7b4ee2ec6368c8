package bus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func envOf(vars map[string]string) Lookup {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func TestParseDefaults(t *testing.T) {
	c, err := Parse(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Prefix: "gangstate.", Cluster: "default", ShimID: "koord-scheduler", Buffer: 10000, Commands: true,
		RoundInterval: time.Second, Holds: true, HoldSilence: 3 * time.Minute,
		Security: Security{Protocol: "PLAINTEXT", CheckHostname: true}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults: got %+v, want %+v", c, want)
	}
	if tc, err := c.Security.TLSConfig(); tc != nil || err != nil || c.Security.SASL() != nil {
		t.Fatal("PLAINTEXT has neither TLS nor SASL")
	}
	if got := c.GangEvents() + " " + c.CommandsTopic(); got != "gangstate.gang-events gangstate.commands" {
		t.Fatalf("topics: %s", got)
	}
	// the default cluster: bare keys, no "cluster" field, the consumer group as before fleets
	if c.Key("ns/g") != "ns/g" || c.Key("ns/a,ns/b") != "ns/a,ns/b" || c.WireCluster() != "" ||
		c.ConsumerGroup() != "gangstate-shim-koord-scheduler" {
		t.Fatalf("default cluster: %q %q %q", c.Key("ns/g"), c.WireCluster(), c.ConsumerGroup())
	}
}

func TestGangstateClusterQualifiesKeysAndTheConsumerGroup(t *testing.T) {
	for _, id := range []string{"eu-1", "a", "0", "gpu-h100-a", strings.Repeat("x", 63)} {
		c, err := Parse(envOf(map[string]string{"GANGSTATE_CLUSTER": " " + id + " "}))
		if err != nil || c.Cluster != id {
			t.Fatalf("GANGSTATE_CLUSTER=%q: %+v %v", id, c.Cluster, err)
		}
	}
	c, err := Parse(envOf(map[string]string{"GANGSTATE_CLUSTER": "eu-1", "GANGSTATE_SHIM_ID": "ks"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Key("team-a/llm") != "eu-1:team-a/llm" || c.Key("ns/a,ns/b") != "eu-1:ns/a,ns/b" ||
		c.WireCluster() != "eu-1" || c.ConsumerGroup() != "gangstate-shim-eu-1:ks" {
		t.Fatalf("eu-1: %q %q %q %q", c.Key("team-a/llm"), c.Key("ns/a,ns/b"), c.WireCluster(),
			c.ConsumerGroup())
	}
	// named explicitly, the default cluster is the default cluster; empty is not set
	for _, v := range []string{"default", ""} {
		c, err := Parse(envOf(map[string]string{"GANGSTATE_CLUSTER": v}))
		if err != nil || c.Cluster != DefaultCluster || c.Key("ns/g") != "ns/g" || c.WireCluster() != "" ||
			c.ConsumerGroup() != "gangstate-shim-koord-scheduler" {
			t.Fatalf("GANGSTATE_CLUSTER=%q: %+v %v", v, c, err)
		}
	}
}

func TestParseNamesOfThePythonSide(t *testing.T) {
	c, err := Parse(envOf(map[string]string{
		"KAFKA_BOOTSTRAP_SERVERS": "k-0:9092, k-1:9092", "GANGSTATE_TOPIC_PREFIX": "",
		"GANGSTATE_SHIM_ID": "shim-a", "GANGSTATE_SHIM_BUFFER": "5", "GANGSTATE_SHIM_COMMANDS": "0",
		"GANGSTATE_SHIM_ROUND_INTERVAL": "250ms", "GANGSTATE_KAFKA_BOOTSTRAP": "old:1",
		"GANGSTATE_SHIM_HOLDS": " OFF ", "GANGSTATE_SHIM_HOLD_SILENCE": "90s"}))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Bootstrap, []string{"k-0:9092", "k-1:9092"}) || c.Prefix != "" ||
		c.ShimID != "shim-a" || c.Buffer != 5 || c.Commands || c.RoundInterval != 250*time.Millisecond ||
		c.Holds || c.HoldSilence != 90*time.Second || len(c.Deprecated) != 0 {
		t.Fatalf("got %+v", c)
	}
}

func TestTheOldBootstrapNameIsADeprecatedAlias(t *testing.T) {
	c, err := Parse(envOf(map[string]string{"GANGSTATE_KAFKA_BOOTSTRAP": "old:1"}))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Bootstrap, []string{"old:1"}) || len(c.Deprecated) != 1 ||
		!strings.HasPrefix(c.Deprecated[0], "GANGSTATE_KAFKA_BOOTSTRAP") {
		t.Fatalf("got %+v", c)
	}
}

func TestBadValuesAreOneLineNamingTheVariable(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GANGSTATE_CLUSTER": "EU-1"}, "GANGSTATE_CLUSTER='EU-1': not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"},
		{map[string]string{"GANGSTATE_CLUSTER": "eu_1"}, "GANGSTATE_CLUSTER='eu_1': not a DNS-1123 label"},
		{map[string]string{"GANGSTATE_CLUSTER": "-eu"}, "GANGSTATE_CLUSTER='-eu': not a DNS-1123 label"},
		{map[string]string{"GANGSTATE_CLUSTER": "eu-"}, "GANGSTATE_CLUSTER='eu-': not a DNS-1123 label"},
		{map[string]string{"GANGSTATE_CLUSTER": "eu:1"}, "GANGSTATE_CLUSTER='eu:1': not a DNS-1123 label"},
		{map[string]string{"GANGSTATE_CLUSTER": "eu.west"}, "GANGSTATE_CLUSTER='eu.west': not a DNS-1123 label"},
		{map[string]string{"GANGSTATE_CLUSTER": strings.Repeat("x", 64)}, "GANGSTATE_CLUSTER='" + strings.Repeat("x", 64) + "': not a DNS-1123 label"},
		{map[string]string{"GANGSTATE_SHIM_BUFFER": "lots"}, "GANGSTATE_SHIM_BUFFER='lots': not a positive number of records"},
		{map[string]string{"GANGSTATE_SHIM_BUFFER": "0"}, "GANGSTATE_SHIM_BUFFER='0'"},
		{map[string]string{"GANGSTATE_SHIM_COMMANDS": "maybe"}, "GANGSTATE_SHIM_COMMANDS='maybe': not 1 or 0"},
		{map[string]string{"GANGSTATE_SHIM_ROUND_INTERVAL": "-1s"}, "GANGSTATE_SHIM_ROUND_INTERVAL='-1s'"},
		{map[string]string{"GANGSTATE_SHIM_HOLDS": "maybe"}, "GANGSTATE_SHIM_HOLDS='maybe': not on or off"},
		{map[string]string{"GANGSTATE_SHIM_HOLD_SILENCE": "3 minutes"}, "GANGSTATE_SHIM_HOLD_SILENCE='3 minutes': not a Go duration > 0 (3m, 90s)"},
		{map[string]string{"GANGSTATE_SHIM_HOLD_SILENCE": "0s"}, "GANGSTATE_SHIM_HOLD_SILENCE='0s': not a Go duration > 0 (3m, 90s)"},
		{map[string]string{"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL='TLS': not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"},
		{map[string]string{"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM='GSSAPI': not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		{map[string]string{"KAFKA_SASL_MECHANISM": "PLAIN"}, "KAFKA_SASL_MECHANISM='PLAIN' needs KAFKA_SECURITY_PROTOCOL SASL_SSL or SASL_PLAINTEXT, not PLAINTEXT"},
		{map[string]string{"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_USERNAME": "u"}, "KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT: set KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE)"},
		{map[string]string{"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD_FILE": filepath.Join(dir, "nope")}, "KAFKA_SASL_PASSWORD_FILE='" + filepath.Join(dir, "nope") + "': no such file or directory"},
		{map[string]string{"KAFKA_SSL_CAFILE": filepath.Join(dir, "ca.pem")}, "KAFKA_SSL_CAFILE='" + filepath.Join(dir, "ca.pem") + "': no such file"},
		{map[string]string{"KAFKA_SSL_CHECK_HOSTNAME": "perhaps"}, "KAFKA_SSL_CHECK_HOSTNAME='perhaps': not true or false"},
	} {
		_, err := Parse(envOf(tc.env))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v, want one line starting %q", tc.env, err, tc.want)
		}
	}
}

func TestSASLMechanismsAsThePythonClients(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for mech, name := range map[string]string{"": "PLAIN", "plain": "PLAIN",
		"SCRAM-SHA-256": "SCRAM-SHA-256", "SCRAM-SHA-512": "SCRAM-SHA-512"} {
		c, err := Parse(envOf(map[string]string{"KAFKA_BOOTSTRAP_SERVERS": "k:9093",
			"KAFKA_SECURITY_PROTOCOL": "sasl_plaintext", "KAFKA_SASL_MECHANISM": mech,
			"KAFKA_SASL_USERNAME": "gangstate", "KAFKA_SASL_PASSWORD_FILE": pw}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Security.Password != "s3cret" {
			t.Fatalf("password from the file without its line break: %q", c.Security.Password)
		}
		m := c.Security.SASL()
		if m == nil || m.Name() != name {
			t.Fatalf("mechanism %q: got %v, want %s", mech, m, name)
		}
		opts, err := c.clientOpts("id")
		if err != nil || len(opts) != 3 { // seeds, client id, SASL; no TLS
			t.Fatalf("client options: %d, %v", len(opts), err)
		}
	}
	// KAFKA_SASL_PASSWORD wins over the file; an empty password is a password
	c, err := Parse(envOf(map[string]string{"KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
		"KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "", "KAFKA_SASL_PASSWORD_FILE": pw}))
	if err != nil || c.Security.Password != "" {
		t.Fatalf("got %q, %v", c.Security.Password, err)
	}
}

// writeCA writes a self-signed CA and a certificate it signed for "broker.test" (PEM files in
// dir) and returns the paths: ca, cert, key.
func writeCA(t *testing.T, dir string) (string, string, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker.test"},
		DNSNames: []string{"broker.test"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der),
		write("key.pem", "EC PRIVATE KEY", keyDER)
}

func TestTLSFromTheFiles(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCA(t, dir)
	c, err := Parse(envOf(map[string]string{"KAFKA_BOOTSTRAP_SERVERS": "broker.test:9093",
		"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": caFile,
		"KAFKA_SSL_CERTFILE": certFile, "KAFKA_SSL_KEYFILE": keyFile}))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := c.Security.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("TLS config: %+v", tc)
	}
	if c.Security.SASL() != nil {
		t.Fatal("SSL has no SASL")
	}
	if opts, err := c.clientOpts("id"); err != nil || len(opts) != 3 { // seeds, id, TLS
		t.Fatalf("client options: %d, %v", len(opts), err)
	}

	// the chain checked, the name not: the broker's certificate verifies against the CA
	// whatever address was dialled
	c.Security.CheckHostname = false
	tc, err = c.Security.TLSConfig()
	if err != nil || !tc.InsecureSkipVerify || tc.VerifyConnection == nil {
		t.Fatalf("no hostname check: %+v, %v", tc, err)
	}
	peer, _ := tls.LoadX509KeyPair(certFile, keyFile)
	leaf, _ := x509.ParseCertificate(peer.Certificate[0])
	if err := tc.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf},
		ServerName: "10.0.0.9"}); err != nil {
		t.Fatalf("a certificate of the CA is refused: %v", err)
	}
	other, _, _ := writeCA(t, t.TempDir())
	c.Security.CAFile = other
	tc, _ = c.Security.TLSConfig()
	if err := tc.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); err == nil {
		t.Fatal("a certificate of another CA is accepted")
	}

	// a CA file without a certificate is one line
	bad := filepath.Join(dir, "empty.pem")
	_ = os.WriteFile(bad, []byte("nothing"), 0o600)
	c.Security.CAFile = bad
	if _, err := c.Security.TLSConfig(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("got %v", err)
	}
	if _, err := Parse(envOf(map[string]string{"KAFKA_SSL_KEYFILE": keyFile})); err == nil ||
		err.Error() != "KAFKA_SSL_KEYFILE needs KAFKA_SSL_CERTFILE" {
		t.Fatalf("got %v", err)
	}
}
