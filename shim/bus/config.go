package bus

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"gangstate.local/shim/fencing"
)

// Config is every setting of the shim, read from the environment in one place (Parse). The
// Kafka variables carry the names gangstate's Python side reads (streams/settings.py,
// docs/kafka-security.md); the GANGSTATE_SHIM_* ones are the shim's own (docs/shim.md):
//
//	KAFKA_BOOTSTRAP_SERVERS        host:port[,host:port]; empty = the shim publishes and
//	                               consumes nothing (deprecated alias: GANGSTATE_KAFKA_BOOTSTRAP)
//	KAFKA_SECURITY_PROTOCOL ...    see Security
//	GANGSTATE_TOPIC_PREFIX         topic prefix, default "gangstate."
//	GANGSTATE_CLUSTER              the cluster this scheduler is of (a DNS-1123 label, at most 63
//	                               characters), default "default": stamped on every record and
//	                               ack outside default, commands of other clusters skipped
//	GANGSTATE_SHIM_ID              the shim's id, default "koord-scheduler" (keep it across restarts)
//	GANGSTATE_SHIM_BUFFER          records the bounded buffer holds, default 10000
//	GANGSTATE_SHIM_COMMANDS        1 (default) or 0 (publish only, no commands consumed)
//	GANGSTATE_SHIM_ROUND_INTERVAL  Go duration >= 0, default 1s (round sampling, docs/shim.md)
//	GANGSTATE_SHIM_HOLDS           on (default) or off (every HoldGang refused, docs/shim.md)
//	GANGSTATE_SHIM_HOLD_SILENCE    Go duration > 0, default 3m: no command heard for that long
//	                               drops every hold
type Config struct {
	Bootstrap     []string
	Prefix        string
	Cluster       string // the cluster this scheduler is of (DefaultCluster when not set)
	ShimID        string
	Buffer        int           // records
	Commands      bool          // consume the commands topic
	RoundInterval time.Duration // at most one detailed round per gang group and interval
	Holds         bool          // HoldGang may be applied (GANGSTATE_SHIM_HOLDS=on)
	HoldSilence   time.Duration // every hold dropped after this long without a command
	Security      Security
	// Deprecated lists the deprecated variable names that were used (for one warning each).
	Deprecated []string
}

// Security is how the shim connects, after the Python side's KafkaSecurity
// (streams/settings.py): Kafka's security.protocol, sasl.mechanism, user and password,
// and the TLS files (PEM paths).
//
//	KAFKA_SECURITY_PROTOCOL   PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
//	KAFKA_SASL_MECHANISM      PLAIN (default with SASL), SCRAM-SHA-256, SCRAM-SHA-512
//	KAFKA_SASL_USERNAME       the SASL user (needed with SASL)
//	KAFKA_SASL_PASSWORD       its password, or KAFKA_SASL_PASSWORD_FILE: a file holding it
//	KAFKA_SSL_CAFILE          PEM file of the CAs of the brokers (default: the system's CAs)
//	KAFKA_SSL_CERTFILE        client certificate (PEM); KAFKA_SSL_KEYFILE its key
//	KAFKA_SSL_CHECK_HOSTNAME  true (default): the broker's certificate must name the address dialled
type Security struct {
	Protocol      string
	Mechanism     string // "" = PLAIN when SASL is on
	Username      string
	Password      string
	CAFile        string
	CertFile      string
	KeyFile       string
	CheckHostname bool
}

// Protocols and Mechanisms are the values Security accepts (as the Python side's
// SECURITY_PROTOCOLS and SASL_MECHANISMS).
var (
	Protocols  = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
	Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
)

// UsesTLS tells whether the connection is TLS (SSL or SASL_SSL).
func (s Security) UsesTLS() bool { return s.Protocol == "SSL" || s.Protocol == "SASL_SSL" }

// UsesSASL tells whether the connection authenticates with SASL (SASL_PLAINTEXT or SASL_SSL).
func (s Security) UsesSASL() bool {
	return s.Protocol == "SASL_PLAINTEXT" || s.Protocol == "SASL_SSL"
}

// Lookup reads one environment variable (os.LookupEnv's shape).
type Lookup func(name string) (string, bool)

// FromEnv is Parse of the process environment.
func FromEnv() (Config, error) { return Parse(os.LookupEnv) }

// Parse reads Config through env. A value the shim cannot use is an error of one line naming
// the variable, as the Python side's SettingsError ("KAFKA_SASL_MECHANISM='X': not one of
// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512").
func Parse(env Lookup) (Config, error) {
	get := func(name string) string { v, _ := env(name); return strings.TrimSpace(v) }
	c := Config{Prefix: "gangstate.", Cluster: DefaultCluster, ShimID: "koord-scheduler", Buffer: 10000, Commands: true,
		RoundInterval: time.Second, Holds: true, HoldSilence: 3 * time.Minute}
	bootstrap := get("KAFKA_BOOTSTRAP_SERVERS")
	if bootstrap == "" {
		if old := get("GANGSTATE_KAFKA_BOOTSTRAP"); old != "" {
			bootstrap = old
			c.Deprecated = append(c.Deprecated, "GANGSTATE_KAFKA_BOOTSTRAP (use KAFKA_BOOTSTRAP_SERVERS)")
		}
	}
	for _, b := range strings.Split(bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Bootstrap = append(c.Bootstrap, b)
		}
	}
	if v, ok := env("GANGSTATE_TOPIC_PREFIX"); ok {
		c.Prefix = v
	}
	if v := get("GANGSTATE_CLUSTER"); v != "" {
		if !IsClusterID(v) {
			return c, fmt.Errorf("GANGSTATE_CLUSTER='%s': not a DNS-1123 label (lowercase "+
				"letters, digits and '-', starting and ending with a letter or digit, at most %d "+
				"characters)", v, ClusterMaxLength)
		}
		c.Cluster = v
	}
	if v := get("GANGSTATE_SHIM_ID"); v != "" {
		c.ShimID = v
	}
	if v := get("GANGSTATE_SHIM_BUFFER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("GANGSTATE_SHIM_BUFFER='%s': not a positive number of records", v)
		}
		c.Buffer = n
	}
	switch v := strings.ToLower(get("GANGSTATE_SHIM_COMMANDS")); v {
	case "", "1", "true":
	case "0", "false":
		c.Commands = false
	default:
		return c, fmt.Errorf("GANGSTATE_SHIM_COMMANDS='%s': not 1 or 0", v)
	}
	if v := get("GANGSTATE_SHIM_ROUND_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("GANGSTATE_SHIM_ROUND_INTERVAL='%s': not a Go duration >= 0 (1s, 500ms)", v)
		}
		c.RoundInterval = d
	}
	switch v := strings.ToLower(get("GANGSTATE_SHIM_HOLDS")); v {
	case "", "on":
	case "off":
		c.Holds = false
	default:
		return c, fmt.Errorf("GANGSTATE_SHIM_HOLDS='%s': not on or off", v)
	}
	if v := get("GANGSTATE_SHIM_HOLD_SILENCE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("GANGSTATE_SHIM_HOLD_SILENCE='%s': not a Go duration > 0 (3m, 90s)", v)
		}
		c.HoldSilence = d
	}
	sec, err := parseSecurity(env)
	if err != nil {
		return c, err
	}
	c.Security = sec
	return c, nil
}

func parseSecurity(env Lookup) (Security, error) {
	get := func(name string) string { v, _ := env(name); return strings.TrimSpace(v) }
	s := Security{Protocol: strings.ToUpper(get("KAFKA_SECURITY_PROTOCOL")),
		Mechanism: strings.ToUpper(get("KAFKA_SASL_MECHANISM")),
		Username:  get("KAFKA_SASL_USERNAME"), CAFile: get("KAFKA_SSL_CAFILE"),
		CertFile: get("KAFKA_SSL_CERTFILE"), KeyFile: get("KAFKA_SSL_KEYFILE"), CheckHostname: true}
	if s.Protocol == "" {
		s.Protocol = "PLAINTEXT"
	}
	if !oneOf(s.Protocol, Protocols) {
		return s, fmt.Errorf("KAFKA_SECURITY_PROTOCOL='%s': not one of %s", s.Protocol,
			strings.Join(Protocols, ", "))
	}
	if s.Mechanism != "" && !oneOf(s.Mechanism, Mechanisms) {
		return s, fmt.Errorf("KAFKA_SASL_MECHANISM='%s': not one of %s", s.Mechanism,
			strings.Join(Mechanisms, ", "))
	}
	if s.Mechanism != "" && !s.UsesSASL() {
		return s, fmt.Errorf("KAFKA_SASL_MECHANISM='%s' needs KAFKA_SECURITY_PROTOCOL SASL_SSL "+
			"or SASL_PLAINTEXT, not %s", s.Mechanism, s.Protocol)
	}
	switch v := strings.ToLower(get("KAFKA_SSL_CHECK_HOSTNAME")); v {
	case "", "true", "1", "yes":
	case "false", "0", "no":
		s.CheckHostname = false
	default:
		return s, fmt.Errorf("KAFKA_SSL_CHECK_HOSTNAME='%s': not true or false", v)
	}
	// the password as given, else the file's text without its trailing line break
	password, given := "", false
	if v, ok := env("KAFKA_SASL_PASSWORD"); ok {
		password, given = v, true
	} else if file := get("KAFKA_SASL_PASSWORD_FILE"); file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return s, fmt.Errorf("KAFKA_SASL_PASSWORD_FILE='%s': %s", file, reasonOf(err))
		}
		password, given = strings.TrimRight(string(raw), "\r\n"), true
	}
	s.Password = password
	if s.UsesSASL() && (s.Username == "" || !given) {
		return s, fmt.Errorf("KAFKA_SECURITY_PROTOCOL=%s: set KAFKA_SASL_USERNAME and "+
			"KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE)", s.Protocol)
	}
	for _, f := range []struct{ name, path string }{{"KAFKA_SSL_CAFILE", s.CAFile},
		{"KAFKA_SSL_CERTFILE", s.CertFile}, {"KAFKA_SSL_KEYFILE", s.KeyFile}} {
		if st, err := os.Stat(f.path); f.path != "" && (err != nil || !st.Mode().IsRegular()) {
			return s, fmt.Errorf("%s='%s': no such file", f.name, f.path)
		}
	}
	if s.KeyFile != "" && s.CertFile == "" {
		return s, fmt.Errorf("KAFKA_SSL_KEYFILE needs KAFKA_SSL_CERTFILE")
	}
	return s, nil
}

func oneOf(v string, xs []string) bool {
	for _, x := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// reasonOf is an OS error's reason without the path it names ("no such file or directory").
func reasonOf(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// DefaultCluster is the cluster of a gangstate without fleet (fencing.DefaultCluster: a record
// without a "cluster" field is of it); ClusterMaxLength bounds a cluster id (a DNS-1123 label).
const (
	DefaultCluster   = fencing.DefaultCluster
	ClusterMaxLength = 63
)

var clusterLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// IsClusterID tells whether v may be a cluster id: a DNS-1123 label of at most 63 characters
// (eu-1, gpu-h100-a), as gangstate's streams/core/cluster.py checks it.
func IsClusterID(v string) bool { return len(v) <= ClusterMaxLength && clusterLabel.MatchString(v) }

// Key is the Kafka key of a gang id or gang group id (ns/name, ns/a,ns/b) of this shim's
// cluster: "<cluster>:<id>" (eu-1:team-a/llm) outside the default cluster, the bare id in it
// (streams/core/cluster.py key_of).
func (c Config) Key(id string) string {
	if c.Cluster == "" || c.Cluster == DefaultCluster {
		return id
	}
	return c.Cluster + ":" + id
}

// WireCluster is the "cluster" field of the records the shim writes: the cluster id outside
// the default cluster, "" in it (the field omitted: absent means default, so a shim without
// fleet writes its records byte for byte as before).
func (c Config) WireCluster() string {
	if c.Cluster == "" || c.Cluster == DefaultCluster {
		return ""
	}
	return c.Cluster
}

// ConsumerGroup is the Kafka consumer group of the commands consumer: gangstate-shim-<shim
// id> in the default cluster, gangstate-shim-<cluster>:<shim id> outside it, so that the shims
// of two clusters with the same GANGSTATE_SHIM_ID (koord-scheduler by default) are two groups,
// each reading every partition of the commands topic, not two members splitting them.
func (c Config) ConsumerGroup() string { return "gangstate-shim-" + c.Key(c.ShimID) }

// GangEvents and CommandsTopic are the full topic names.
func (c Config) GangEvents() string    { return c.Prefix + "gang-events" }
func (c Config) CommandsTopic() string { return c.Prefix + "commands" }

// clientOpts are the options every Kafka client of the shim starts from: the seed brokers,
// its client id, TLS and SASL as Security says.
func (c Config) clientOpts(clientID string) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap...), kgo.ClientID(clientID)}
	if c.Security.UsesTLS() {
		tc, err := c.Security.TLSConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := c.Security.SASL(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// TLSConfig is the TLS of every connection (nil without TLS): the system's CAs or CAFile's,
// the client certificate when given (the key from KeyFile, else from CertFile, as Python's
// load_cert_chain), the broker's host name checked unless CheckHostname is false (the chain is
// checked either way). franz-go sets the server name to the host dialled (kgo.DialTLSConfig).
func (s Security) TLSConfig() (*tls.Config, error) {
	if !s.UsesTLS() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("KAFKA_SSL_CAFILE='%s': %s", s.CAFile, reasonOf(err))
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("KAFKA_SSL_CAFILE='%s': no PEM certificate in it", s.CAFile)
		}
	}
	if s.CertFile != "" {
		key := s.KeyFile
		if key == "" {
			key = s.CertFile
		}
		cert, err := tls.LoadX509KeyPair(s.CertFile, key)
		if err != nil {
			return nil, fmt.Errorf("KAFKA_SSL_CERTFILE='%s': %v", s.CertFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if !s.CheckHostname {
		// verify the chain against the roots, not the name (Python's check_hostname=False)
		roots := tc.RootCAs
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("the broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots,
				Intermediates: inter})
			return err
		}
	}
	return tc, nil
}

// SASL is the SASL mechanism of every connection (nil without SASL).
func (s Security) SASL() sasl.Mechanism {
	if !s.UsesSASL() {
		return nil
	}
	switch s.Mechanism {
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	}
	return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
}
