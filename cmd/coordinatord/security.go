package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/principal"
	"github.com/coordinatord/coordinatord/internal/service"
	"github.com/coordinatord/coordinatord/internal/tlsconfig"
)

// securitySettings are the values of the security keys (groupcfg.KeyTLS*, KeyMetricsTLSEnabled,
// KeyAuthorizer*).
type securitySettings struct {
	tls        bool
	files      tlsconfig.Settings
	peerCA     tlsconfig.File // tls.peer.ca.file: the CA of the nodes' certificates (cluster mode)
	clientAuth string         // groupcfg.ClientAuthNone, ClientAuthRequested or ClientAuthRequired
	minVersion string         // "TLSv1.2" or "TLSv1.3"
	metricsTLS bool
	authorize  bool
	grants     service.AuthorizerConfig
}

// readSecuritySettings reads the security keys and checks how they fit together. Each problem is
// one line naming the keys and the fix; the keys' own values were validated by groupcfg already.
func readSecuritySettings(b groupcfg.Broker) (securitySettings, []string) {
	text := func(key string) string { v, _ := b.Text(key); return v }
	flag := func(key string) bool { v, _ := b.Bool(key); return v }
	file := func(key string) tlsconfig.File { return tlsconfig.File{Setting: key, Path: text(key)} }
	s := securitySettings{
		tls: flag(groupcfg.KeyTLSEnabled),
		files: tlsconfig.Settings{Cert: file(groupcfg.KeyTLSCertFile), Key: file(groupcfg.KeyTLSKeyFile),
			CA: file(groupcfg.KeyTLSClientCAFile)},
		peerCA:     file(groupcfg.KeyTLSPeerCAFile),
		clientAuth: text(groupcfg.KeyTLSClientAuth),
		minVersion: text(groupcfg.KeyTLSMinVersion),
		metricsTLS: flag(groupcfg.KeyMetricsTLSEnabled),
		authorize:  flag(groupcfg.KeyAuthorizerEnabled),
	}
	var problems []string
	lists := []struct {
		key  string
		dest *[]string
	}{
		{groupcfg.KeyAuthorizerClusterAction, &s.grants.ClusterAction},
		{groupcfg.KeyAuthorizerAlterConfigs, &s.grants.AlterConfigs},
		{groupcfg.KeyAuthorizerDescribeConfigs, &s.grants.DescribeConfigs},
		{groupcfg.KeyAuthorizerAlterCluster, &s.grants.AlterCluster},
	}
	for _, l := range lists {
		principals, err := principal.ParseList(text(l.key))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %v", l.key, err))
			continue
		}
		*l.dest = principals
		if len(principals) > 0 && !s.authorize {
			problems = append(problems, fmt.Sprintf("%s is set but %s=false, so it would not be enforced: set %s=true, or remove %s",
				l.key, groupcfg.KeyAuthorizerEnabled, groupcfg.KeyAuthorizerEnabled, l.key))
		}
	}
	verifiesClients := s.clientAuth == groupcfg.ClientAuthRequested || s.clientAuth == groupcfg.ClientAuthRequired
	if !s.tls {
		for _, f := range []tlsconfig.File{s.files.Cert, s.files.Key, s.files.CA, s.peerCA} {
			if f.Path != "" {
				problems = append(problems, fmt.Sprintf("%s is set but %s=false, so gRPC would be served in plaintext: set %s=true, or remove %s",
					f.Setting, groupcfg.KeyTLSEnabled, groupcfg.KeyTLSEnabled, f.Setting))
			}
		}
		if verifiesClients {
			problems = append(problems, fmt.Sprintf("%s=%s needs TLS: set %s=true with a certificate, or set %s=none",
				groupcfg.KeyTLSClientAuth, s.clientAuth, groupcfg.KeyTLSEnabled, groupcfg.KeyTLSClientAuth))
		}
	} else {
		if s.files.Cert.Path == "" || s.files.Key.Path == "" {
			problems = append(problems, fmt.Sprintf("%s=true needs %s and %s: set both to PEM files (certificate chain and private key)",
				groupcfg.KeyTLSEnabled, groupcfg.KeyTLSCertFile, groupcfg.KeyTLSKeyFile))
		}
		if verifiesClients && s.files.CA.Path == "" {
			problems = append(problems, fmt.Sprintf("%s=%s needs %s: set it to a PEM file of the CAs that sign client certificates",
				groupcfg.KeyTLSClientAuth, s.clientAuth, groupcfg.KeyTLSClientCAFile))
		}
		if !verifiesClients && s.files.CA.Path != "" {
			problems = append(problems, fmt.Sprintf("%s is set but %s=none, so client certificates would not be asked for: set %s=required (or requested), or remove %s",
				groupcfg.KeyTLSClientCAFile, groupcfg.KeyTLSClientAuth, groupcfg.KeyTLSClientAuth, groupcfg.KeyTLSClientCAFile))
		}
	}
	if s.metricsTLS && !s.tls {
		problems = append(problems, fmt.Sprintf("%s=true needs %s=true: the metrics port serves the gRPC port's certificate",
			groupcfg.KeyMetricsTLSEnabled, groupcfg.KeyTLSEnabled))
	}
	if s.authorize && (!s.tls || !verifiesClients) {
		problems = append(problems, fmt.Sprintf("%s=true needs client certificates to identify callers: set %s=true, %s=required (or requested) and %s, or set %s=false",
			groupcfg.KeyAuthorizerEnabled, groupcfg.KeyTLSEnabled, groupcfg.KeyTLSClientAuth, groupcfg.KeyTLSClientCAFile, groupcfg.KeyAuthorizerEnabled))
	}
	return s, problems
}

// security is the server's transport security and authorization, built from securitySettings.
type security struct {
	logger     *zap.Logger
	settings   securitySettings
	store      *tlsconfig.Store    // nil without TLS
	peer       *tlsconfig.Store    // the node's certificate and the peer CA; nil without tls.peer.ca.file
	grpcTLS    *tls.Config         // nil: plaintext gRPC
	metricsTLS *tls.Config         // nil: plain HTTP metrics
	authorizer *service.Authorizer // nil: every call allowed
}

// newSecurity checks the security keys and loads the TLS files. Every error is a configuration
// problem, one line each, naming the key and the fix.
func newSecurity(logger *zap.Logger, b groupcfg.Broker, reg prometheus.Registerer) (*security, error) {
	s, problems := readSecuritySettings(b)
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	sec := &security{logger: logger, settings: s}
	if s.tls {
		store, err := tlsconfig.NewStore(logger, s.files, reg)
		if err != nil {
			return nil, fmt.Errorf("%w: fix the file or the setting", err)
		}
		sec.store = store
		minVersion := sec.minTLSVersion()
		clientAuth := tls.NoClientCert
		switch s.clientAuth {
		case groupcfg.ClientAuthRequested:
			clientAuth = tls.VerifyClientCertIfGiven
		case groupcfg.ClientAuthRequired:
			clientAuth = tls.RequireAndVerifyClientCert
		}
		sec.grpcTLS = store.ServerConfig(clientAuth, minVersion, "h2")
		if s.peerCA.Path != "" {
			peer, err := tlsconfig.NewStore(logger.Named("peer-tls"), tlsconfig.Settings{Cert: s.files.Cert, Key: s.files.Key, CA: s.peerCA}, nil)
			if err != nil {
				return nil, fmt.Errorf("%w: fix the file or the setting", err)
			}
			sec.peer = peer
		}
		if s.metricsTLS {
			sec.metricsTLS = store.ServerConfig(tls.NoClientCert, minVersion, "http/1.1")
		}
	}
	if s.authorize {
		sec.authorizer = service.NewAuthorizer(logger.Named("authorizer"), s.grants)
		if len(s.grants.ClusterAction)+len(s.grants.AlterConfigs)+len(s.grants.DescribeConfigs)+len(s.grants.AlterCluster) == 0 {
			logger.Warn("authorization is on but no principal holds any permission: every call except health checks will be denied")
		}
	}
	return sec, nil
}

// credentials returns the gRPC transport credentials (nil: plaintext). Handshakes they refuse
// are logged, rate-limited: gRPC drops those connections silently.
func (s *security) credentials() credentials.TransportCredentials {
	if s.grpcTLS == nil {
		return nil
	}
	return tlsconfig.LogHandshakeFailures(s.logger.Named("grpc-tls"), credentials.NewTLS(s.grpcTLS))
}

// authorize returns the authorization interceptor (nil: none).
func (s *security) authorize() grpc.UnaryServerInterceptor {
	if s.authorizer == nil {
		return nil
	}
	return s.authorizer.Unary()
}

// authorizeStream is authorize for streaming calls.
func (s *security) authorizeStream() grpc.StreamServerInterceptor {
	if s.authorizer == nil {
		return nil
	}
	return s.authorizer.Stream()
}

// minTLSVersion is tls.min.version.
func (s *security) minTLSVersion() uint16 {
	if s.settings.minVersion == "TLSv1.3" {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// peerTLS returns the replication port's TLS material (nil: plaintext), and checks that a cluster
// node with TLS on has it: its Raft traffic would otherwise be the one plaintext port.
func (s *security) peerTLS() (*tlsconfig.Store, error) {
	if s.settings.tls && s.peer == nil {
		return nil, fmt.Errorf("%s=true in cluster mode needs %s: set it to a PEM file of the CA that signs the nodes' certificates, so that the replication port is mutual TLS too",
			groupcfg.KeyTLSEnabled, groupcfg.KeyTLSPeerCAFile)
	}
	return s.peer, nil
}

// metricsTLSConfig returns the metrics port's TLS configuration (nil: plain HTTP).
func (s *security) metricsTLSConfig() *tls.Config { return s.metricsTLS }

// reloadOnHangup re-reads the TLS files on every SIGHUP until ctx ends. Without TLS there is
// nothing to re-read: SIGHUP is logged and otherwise ignored, rather than ending the process
// without a drain (its default action), as a reload signal sent to every server must not do.
func (s *security) reloadOnHangup(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
				if s.store == nil {
					s.logger.Info("SIGHUP received: nothing to reload, TLS is off")
					continue
				}
				s.store.Reload("SIGHUP")
				if s.peer != nil {
					s.peer.Reload("SIGHUP")
				}
			case <-ctx.Done():
				return
			}
		}
	}()
}

// fields describe the security set-up for the start-up log.
func (s *security) fields() []zap.Field {
	f := []zap.Field{
		zap.Bool("tls", s.settings.tls),
		zap.Bool("metrics_tls", s.settings.metricsTLS),
		zap.Bool("authorization", s.settings.authorize),
	}
	if s.settings.tls {
		f = append(f, zap.String("client_auth", s.settings.clientAuth), zap.Bool("peer_tls", s.peer != nil))
	}
	if s.settings.authorize {
		f = append(f, zap.String("grants", s.settings.grants.String()))
	}
	return f
}
