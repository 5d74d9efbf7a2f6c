// Package connlimit bounds what the clients of one listening port can hold: how many connections
// the port keeps open, how many of them come from one IP address (with per-address overrides, as
// Kafka's max.connections.per.ip and max.connections.per.ip.overrides), and how long one write to
// a client may block. A connection past a bound is accepted and closed at once, so that it holds
// no file descriptor and the listen backlog stays empty for the clients within their bounds.
//
// It counts the connections each listener holds open and refuses (sharecoord_connections_open,
// sharecoord_connections_refused_total by listener and reason) and warns, at most once every
// 10 s per listener and reason, when it refuses one. A server can close a connection by its peer
// address (CloseConn), to drop a client that does not read what it is sent.
//
// It knows sockets only: handshakes, idle connections and what a connection's calls hold are the
// protocol servers' to bound.
package connlimit
