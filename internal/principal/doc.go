// Package principal names the clients of coordinatord as Kafka names them: a client's principal
// is "User:" followed by the subject of its verified TLS client certificate as an RFC 2253
// distinguished name, and a client without a verified certificate has none. It also reads the
// lists of principals that grant permissions, with Kafka's wildcards.
//
// It knows identities only: which principal may do what is decided by the service's authorizer,
// and which certificates are verified by the TLS configuration that served the connection.
package principal
