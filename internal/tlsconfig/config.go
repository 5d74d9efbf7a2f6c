package tlsconfig

import (
	"crypto/tls"
	"errors"
	"sync/atomic"
)

// ServerConfig returns the server tls.Config of a listening port over the Store's material: at
// each handshake it presents the current certificate and, as clientAuth asks, verifies client
// certificates against the current CA. minVersion is the oldest TLS version accepted and
// nextProtos the application protocols offered (ALPN). The tls.Config handed to a connection is
// rebuilt only when the material changes.
func (s *Store) ServerConfig(clientAuth tls.ClientAuthType, minVersion uint16, nextProtos ...string) *tls.Config {
	l := &listener{store: s, clientAuth: clientAuth, nextProtos: nextProtos, minVersion: minVersion}
	return &tls.Config{
		MinVersion:         minVersion,
		NextProtos:         nextProtos,
		ClientAuth:         clientAuth,
		GetConfigForClient: l.configForClient,
	}
}

// listener builds the per-connection configurations of one ServerConfig.
type listener struct {
	store      *Store
	clientAuth tls.ClientAuthType
	nextProtos []string
	minVersion uint16
	cache      atomic.Pointer[listenerConfig]
}

type listenerConfig struct {
	material *material
	config   *tls.Config
}

func (l *listener) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
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
		ClientCAs:    m.cas,
		NextProtos:   l.nextProtos,
		MinVersion:   l.minVersion,
	}
	l.cache.Store(&listenerConfig{material: m, config: cfg})
	return cfg, nil
}

// ClientConfig returns a client tls.Config for connections to a peer whose certificate the same
// CA signs, for mutual TLS between nodes: it verifies the peer's certificate for serverName
// against the CA loaded now (the system's roots without a CA file), and presents the Store's
// current certificate at each handshake when the peer asks for one. minVersion is the oldest TLS
// version accepted. A CA reloaded later is used by the configurations asked for after it.
func (s *Store) ClientConfig(serverName string, minVersion uint16) *tls.Config {
	return &tls.Config{
		MinVersion: minVersion,
		ServerName: serverName,
		RootCAs:    s.material().cas,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &s.material().cert, nil
		},
	}
}
