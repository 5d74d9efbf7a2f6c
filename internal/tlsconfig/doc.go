// Package tlsconfig keeps a node's TLS material (its certificate chain, private key and the CAs
// of its clients and peers) loaded from PEM files and current, and builds the tls.Configs that
// use it: for the node's listening ports (Store.ServerConfig) and for its connections to peers
// (Store.ClientConfig), both serving whatever material is current at each handshake.
//
// A Store re-reads the files when they change, checked on each new connection (three stat calls:
// inode, size and modification time), and when asked to (Store.Reload, on SIGHUP), so that a
// certificate rotated on disk by cert-manager, a Kubernetes secret update or by hand is used from
// the next handshake on, without a restart; connections already open keep their session. A
// version of the files that does not load (a half-written file, a key that does not match the
// certificate, an expired certificate) is logged once and the previous material stays in use
// until the files change again; a certificate that is not valid yet is tried again from its start
// on. The metrics sharecoord_tls_certificate_not_after_seconds and
// sharecoord_tls_reloads_total{result} follow it.
//
// LogHandshakeFailures wraps a port's gRPC credentials so that the handshakes they refuse are
// logged (rate-limited), which gRPC does not do.
//
// The package knows files, not configuration: each File carries the name of the setting that
// names it, which every error and log line about the file quotes as setting=path.
package tlsconfig
