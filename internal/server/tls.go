package server

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/settings"
)

// recheckEvery is how often the TLS files are looked at again: at most once
// per interval, when a handshake needs them.
const recheckEvery = time.Second

// serverTLS is the TLS of a server, gRPC's or HTTP's: its certificate and,
// for mutual TLS, the CAs that client certificates must chain to. Both are
// read from their files again when the files change, so a rotated
// certificate (by cert-manager, say) is served from the next handshake on
// without a restart. It is safe for concurrent use.
type serverTLS struct {
	cert       *reloading[*tls.Certificate]
	clientCAs  *reloading[*x509.CertPool] // nil without mutual TLS
	nextProtos []string
	// clientAuth is how client certificates are asked for with mutual TLS.
	clientAuth tls.ClientAuthType
}

// tlsSettings names the files of one server's TLS, each with its variable.
type tlsSettings struct {
	what                string // "gRPC" or "HTTP"
	cert, key, clientCA envFile
	nextProtos          []string
	clientAuth          tls.ClientAuthType
}

// newGRPCTLS reads the gRPC TLS files the settings name, or returns nil
// when they name none. With mutual TLS every client must present a
// certificate. Its errors name the variable at fault.
func newGRPCTLS(s settings.Settings, logger *slog.Logger, now time.Time) (*serverTLS, error) {
	return newServerTLS(tlsSettings{
		what:       "gRPC",
		cert:       envFile{"RLS_GRPC_TLS_CERT_FILE", s.GRPCTlsCertFile},
		key:        envFile{"RLS_GRPC_TLS_KEY_FILE", s.GRPCTlsKeyFile},
		clientCA:   envFile{"RLS_GRPC_TLS_CLIENT_CA_FILE", s.GRPCTlsClientCaFile},
		nextProtos: []string{"h2"},
		clientAuth: tls.RequireAndVerifyClientCert,
	}, logger, now)
}

// newHTTPTLS reads the HTTP TLS files the settings name, or returns nil
// when they name none. With mutual TLS a client certificate is verified
// when one is presented, and the handler decides which paths need one:
// the probes cannot present any.
func newHTTPTLS(s settings.Settings, logger *slog.Logger, now time.Time) (*serverTLS, error) {
	return newServerTLS(tlsSettings{
		what:       "HTTP",
		cert:       envFile{"RLS_HTTP_TLS_CERT_FILE", s.HTTPTlsCertFile},
		key:        envFile{"RLS_HTTP_TLS_KEY_FILE", s.HTTPTlsKeyFile},
		clientCA:   envFile{"RLS_HTTP_TLS_CLIENT_CA_FILE", s.HTTPTlsClientCaFile},
		nextProtos: []string{"h2", "http/1.1"},
		clientAuth: tls.VerifyClientCertIfGiven,
	}, logger, now)
}

// newServerTLS reads the files ts names, or returns nil when it names no
// certificate.
func newServerTLS(ts tlsSettings, logger *slog.Logger, now time.Time) (*serverTLS, error) {
	if ts.cert.path == "" {
		return nil, nil
	}
	t := serverTLS{nextProtos: ts.nextProtos, clientAuth: ts.clientAuth}
	var err error
	t.cert, err = newReloading(ts.what+" TLS certificate", []envFile{ts.cert, ts.key}, parseKeyPair, describeCert, logger, now)
	if err != nil {
		return nil, err
	}
	if ts.clientCA.path != "" {
		t.clientCAs, err = newReloading(ts.what+" TLS client CA", []envFile{ts.clientCA}, parseCAs, nil, logger, now)
		if err != nil {
			return nil, err
		}
	}
	leaf := t.cert.get(now).Leaf
	logger.Info(ts.what+" serves TLS", "cert_file", ts.cert.path, "client_ca_file", ts.clientCA.path,
		"subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
	return &t, nil
}

// mutual reports whether client certificates are verified.
func (t *serverTLS) mutual() bool { return t != nil && t.clientCAs != nil }

// config returns the server's tls.Config: TLS 1.2 or later, with the
// current certificate and, for mutual TLS, client certificates asked for
// and verified against the current CAs.
func (t *serverTLS) config() *tls.Config {
	getCertificate := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return t.cert.get(time.Now()), nil
	}
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     t.nextProtos,
		GetCertificate: getCertificate,
	}
	if t.clientCAs != nil {
		c.ClientAuth = t.clientAuth
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{
				MinVersion:     tls.VersionTLS12,
				NextProtos:     t.nextProtos,
				GetCertificate: getCertificate,
				ClientAuth:     t.clientAuth,
				ClientCAs:      t.clientCAs.get(time.Now()),
			}, nil
		}
	}
	return c
}

// parseKeyPair parses a PEM certificate chain and its private key.
func parseKeyPair(data [][]byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(data[0], data[1])
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

func describeCert(c *tls.Certificate) []any {
	return []any{"subject", c.Leaf.Subject.String(), "serial", c.Leaf.SerialNumber.String(), "not_after", c.Leaf.NotAfter}
}

// parseCAs parses PEM CA certificates.
func parseCAs(data [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[0]) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}

// envFile is a file named by an environment variable.
type envFile struct{ env, path string }

// reloading is a value parsed from files, parsed again when what they hold
// changes. It reads them at most once per recheckEvery, when its value is
// asked for; comparing contents rather than modification times, it sees
// every change, however soon after the last one it is made. When the files
// fail to read or parse, the value in hand stays, and the failure is logged
// once for each change of the files. Neither the files' contents nor the
// value are ever logged. It is safe for concurrent use.
type reloading[T any] struct {
	what     string
	files    []envFile
	parse    func(data [][]byte) (T, error)
	describe func(T) []any // what to log about a new value; nil for nothing
	log      *slog.Logger

	mu      sync.Mutex
	value   T
	sum     [sha256.Size]byte // of the contents last read
	checked time.Time         // when the files were last read
	lastErr string            // the failure last logged; "" after a success
}

// newReloading reads and parses the files at now. Its errors name the
// variable of the file at fault, or of every file when parsing fails.
func newReloading[T any](what string, files []envFile, parse func([][]byte) (T, error), describe func(T) []any, logger *slog.Logger, now time.Time) (*reloading[T], error) {
	r := &reloading[T]{what: what, files: files, parse: parse, describe: describe, log: logger, checked: now}
	data, err := r.read()
	if err == nil {
		r.value, err = r.parseAll(data)
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	r.sum = digest(data)
	return r, nil
}

// get returns the value, first reading the files again if it has not for
// recheckEvery, and parsing them if they changed.
func (r *reloading[T]) get(now time.Time) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.checked) < recheckEvery {
		return r.value
	}
	r.checked = now
	data, err := r.read()
	if err == nil {
		sum := digest(data)
		if sum == r.sum {
			return r.value
		}
		// Whatever parsing gives, these contents are not parsed again:
		// broken files are reported once, not once a second.
		r.sum = sum
		var v T
		if v, err = r.parseAll(data); err == nil {
			r.value, r.lastErr = v, ""
			attrs := []any{"files", r.paths()}
			if r.describe != nil {
				attrs = append(attrs, r.describe(v)...)
			}
			r.log.Info("reloaded "+r.what, attrs...)
			return v
		}
	}
	if msg := err.Error(); msg != r.lastErr {
		r.lastErr = msg
		r.log.Error(r.what+" not reloaded; the previous one stays in use", "files", r.paths(), "err", err)
	}
	return r.value
}

// read reads every file; its errors name the file's variable.
func (r *reloading[T]) read() ([][]byte, error) {
	data := make([][]byte, len(r.files))
	for i, f := range r.files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.env, err)
		}
		data[i] = b
	}
	return data, nil
}

// parseAll parses the files' contents; its errors name every file.
func (r *reloading[T]) parseAll(data [][]byte) (T, error) {
	v, err := r.parse(data)
	if err != nil {
		envs := make([]string, len(r.files))
		for i, f := range r.files {
			envs[i] = f.env
		}
		return v, fmt.Errorf("%s: %s: %w", strings.Join(envs, " and "), strings.Join(r.paths(), ", "), err)
	}
	return v, nil
}

func (r *reloading[T]) paths() []string {
	p := make([]string, len(r.files))
	for i, f := range r.files {
		p[i] = f.path
	}
	return p
}

// digest is a digest of the contents of several files.
func digest(data [][]byte) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, d := range data {
		binary.BigEndian.PutUint64(n[:], uint64(len(d)))
		h.Write(n[:])
		h.Write(d)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
