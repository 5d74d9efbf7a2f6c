package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
)

// certFiles names the PEM files of the server's TLS material.
type certFiles struct {
	cert, key string // server certificate chain and its private key
	clientCA  string // CAs that sign client certificates; "" when clients are not verified
}

// keyedFile is one of the files with the key that names it.
type keyedFile struct{ key, name string }

// list returns the files with their keys, in fileStamps order; a name is "" when not set.
func (f certFiles) list() [3]keyedFile {
	return [3]keyedFile{
		{groupcfg.KeyTLSCertFile, f.cert}, {groupcfg.KeyTLSKeyFile, f.key}, {groupcfg.KeyTLSClientCAFile, f.clientCA},
	}
}

// tlsMaterial is one loaded version of the files: immutable once built.
type tlsMaterial struct {
	cert      tls.Certificate
	leaf      *x509.Certificate
	clientCAs *x509.CertPool // nil without a client CA file
}

// fileStamps identify the version of each file that a material was read from.
type fileStamps [3]os.FileInfo

// same reports whether every file is still the one (same inode, size and modification time)
// that was read.
func (a fileStamps) same(b fileStamps) bool {
	for i := range a {
		switch {
		case a[i] == nil && b[i] == nil:
		case a[i] == nil || b[i] == nil:
			return false
		case !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()):
			return false
		}
	}
	return true
}

// certStore serves the current TLS material and reloads it when its files change: every new
// connection checks the files' inode, size and modification time (three stat calls) and re-reads
// them when any differs, so a certificate rotated on disk (by cert-manager, a Kubernetes secret
// update, or by hand) is used from the next handshake on, without a restart. A version that does
// not load (a half-written file, a key that does not match the certificate, an expired
// certificate) is logged once and the previous material stays in use until the files change
// again; a certificate that is not valid yet is tried again from its start date on. Safe for
// concurrent use.
type certStore struct {
	logger  *zap.Logger
	files   certFiles
	metrics *tlsMetrics

	mu      sync.Mutex   // guards the fields below; serializes checks and reloads
	current *tlsMaterial // never nil once built
	loaded  fileStamps   // what current was read from
	failed  fileStamps   // the last version that failed to load (not retried until it changes)
	retryAt time.Time    // when failed is a certificate not valid yet: its start, to retry then
	statErr string       // the last error checking the files (logged once)
}

// notYetValidError is a certificate whose validity starts in the future.
type notYetValidError struct {
	file      string
	notBefore time.Time
}

func (e *notYetValidError) Error() string {
	return fmt.Sprintf("%s=%s: the certificate is not valid before %s", groupcfg.KeyTLSCertFile, e.file,
		e.notBefore.UTC().Format(time.RFC3339))
}

// newCertStore reads the files once; an error names the file that is missing or bad.
func newCertStore(logger *zap.Logger, files certFiles, metrics *tlsMetrics) (*certStore, error) {
	s := &certStore{logger: logger, files: files, metrics: metrics}
	stamps, err := s.stat()
	if err != nil {
		return nil, err
	}
	m, err := loadTLSMaterial(files)
	if err != nil {
		return nil, err
	}
	s.install(m, stamps)
	return s, nil
}

func (s *certStore) stat() (fileStamps, error) {
	var st fileStamps
	for i, f := range s.files.list() {
		if f.name == "" {
			continue
		}
		fi, err := os.Stat(f.name)
		if err != nil {
			return st, fmt.Errorf("%s=%s: %w", f.key, f.name, err)
		}
		st[i] = fi
	}
	return st, nil
}

// install makes m current; s.mu is held or s is not shared yet.
func (s *certStore) install(m *tlsMaterial, stamps fileStamps) {
	s.current = m
	s.loaded = stamps
	s.failed = fileStamps{}
	s.metrics.observe(m)
}

// material returns the material to use for a new connection, reloading it first if its files
// changed.
func (s *certStore) material() *tlsMaterial {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamps, err := s.stat()
	if err != nil {
		if msg := err.Error(); msg != s.statErr {
			s.statErr = msg
			s.metrics.reloads.WithLabelValues("failure").Inc()
			s.logger.Error("cannot check the TLS files; the loaded certificate stays in use", zap.Error(err))
		}
		return s.current
	}
	s.statErr = ""
	if stamps.same(s.loaded) || stamps.same(s.failed) && (s.retryAt.IsZero() || time.Now().Before(s.retryAt)) {
		return s.current
	}
	s.reloadLocked(stamps, "the files changed")
	return s.current
}

// reload re-reads the files now, whether or not they changed (SIGHUP).
func (s *certStore) reload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamps, err := s.stat()
	if err != nil {
		s.metrics.reloads.WithLabelValues("failure").Inc()
		s.logger.Error("TLS reload failed; the loaded certificate stays in use", zap.Error(err))
		return
	}
	s.reloadLocked(stamps, "SIGHUP")
}

func (s *certStore) reloadLocked(stamps fileStamps, why string) {
	m, err := loadTLSMaterial(s.files)
	if err != nil {
		s.failed = stamps
		s.retryAt = time.Time{}
		if nyv := (*notYetValidError)(nil); errors.As(err, &nyv) {
			s.retryAt = nyv.notBefore
		}
		s.metrics.reloads.WithLabelValues("failure").Inc()
		if !s.retryAt.IsZero() {
			s.logger.Error("TLS reload failed; the loaded certificate stays in use until the new one becomes valid or the files change again",
				zap.String("reason", why), zap.Time("retry_at", s.retryAt), zap.Error(err))
			return
		}
		s.logger.Error("TLS reload failed; the loaded certificate stays in use until the files change again",
			zap.String("reason", why), zap.Error(err))
		return
	}
	s.install(m, stamps)
	s.metrics.reloads.WithLabelValues("success").Inc()
	s.logger.Info("TLS certificate reloaded", zap.String("reason", why),
		zap.String("subject", m.leaf.Subject.String()), zap.String("serial", m.leaf.SerialNumber.String()),
		zap.Time("not_after", m.leaf.NotAfter))
}

// loadTLSMaterial reads and checks the files: the key must match the certificate, which must be
// valid now (clients refuse an expired or not yet valid one), and the client CA file, when named,
// must hold at least one certificate.
func loadTLSMaterial(files certFiles) (*tlsMaterial, error) {
	cert, err := tls.LoadX509KeyPair(files.cert, files.key)
	if err != nil {
		return nil, fmt.Errorf("%s=%s, %s=%s: %w", groupcfg.KeyTLSCertFile, files.cert, groupcfg.KeyTLSKeyFile, files.key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", groupcfg.KeyTLSCertFile, files.cert, err)
		}
	}
	switch now := time.Now(); {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%s=%s: the certificate expired at %s; renew it", groupcfg.KeyTLSCertFile, files.cert,
			leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, &notYetValidError{file: files.cert, notBefore: leaf.NotBefore}
	}
	m := &tlsMaterial{cert: cert, leaf: leaf}
	if files.clientCA != "" {
		if m.clientCAs, err = readCertPool(files.clientCA); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", groupcfg.KeyTLSClientCAFile, files.clientCA, err)
		}
	}
	return m, nil
}

// readCertPool reads a PEM file of CA certificates; one holding none is an error.
func readCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("the file holds no PEM certificate")
	}
	return pool, nil
}

// listenerTLS is the TLS configuration of one listening port: how clients are authenticated and
// which application protocols are offered, over the certStore's current material. The tls.Config
// handed to a connection is rebuilt only when the material changes.
type listenerTLS struct {
	store      *certStore
	clientAuth tls.ClientAuthType
	nextProtos []string
	minVersion uint16
	cache      atomic.Pointer[listenerConfig]
}

type listenerConfig struct {
	material *tlsMaterial
	config   *tls.Config
}

// Config returns the server tls.Config of the port.
func (l *listenerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion:         l.minVersion,
		NextProtos:         l.nextProtos,
		ClientAuth:         l.clientAuth,
		GetConfigForClient: l.configForClient,
	}
}

func (l *listenerTLS) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	m := l.store.material()
	if m == nil {
		return nil, errors.New("no TLS certificate loaded")
	}
	if c := l.cache.Load(); c != nil && c.material == m {
		return c.config, nil
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   l.clientAuth,
		ClientCAs:    m.clientCAs,
		NextProtos:   l.nextProtos,
		MinVersion:   l.minVersion,
	}
	l.cache.Store(&listenerConfig{material: m, config: cfg})
	return cfg, nil
}

// tlsMetrics are the metrics of the server certificate.
type tlsMetrics struct {
	notAfter prometheus.Gauge
	reloads  *prometheus.CounterVec
}

func newTLSMetrics(reg prometheus.Registerer) *tlsMetrics {
	m := &tlsMetrics{
		notAfter: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sharecoord_tls_certificate_not_after_seconds",
			Help: "Expiry (Unix time) of the server certificate in use; alert well before it passes.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_tls_reloads_total",
			Help: "Reloads of the TLS certificate, key and client CA files after they changed or on SIGHUP, by result.",
		}, []string{"result"}),
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	if reg != nil {
		reg.MustRegister(m.notAfter, m.reloads)
	}
	return m
}

func (m *tlsMetrics) observe(t *tlsMaterial) {
	m.notAfter.Set(float64(t.leaf.NotAfter.Unix()))
}
