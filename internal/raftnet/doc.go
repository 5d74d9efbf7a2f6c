// Package raftnet carries cluster mode's Raft traffic between nodes: a transport for dragonboat
// (config.TransportFactory) whose replication port has the bounds of coordinatord's other ports,
// which dragonboat's own TCP transport does not have.
//
// The port accepts connections within connlimit's bounds (in all and per IP address); each must
// finish its TLS handshake, when TLS is on, and its preface within the handshake timeout, and is
// closed when it sends nothing for the idle timeout or when a message it announced does not
// arrive in time. A message announces its length, at most MaxFrameBytes, and the buffer it is read
// into grows with the bytes that arrive, not with the length announced; the messages being read
// from all connections at once hold at most Options.MaxPendingBytes, and one that finds no room
// within its time to arrive closes its connection. Writes to a peer fail
// past the send timeout, and dragonboat then connects again.
//
// dragonboat opens several message connections to each peer, each for some of the Raft shards;
// they share one stream (one TCP connection) per peer, on which the batches sent while another
// is being written go out together in one write, and each connection is read through a 64 KiB
// buffer: a step's batches to a peer cost about one write and one read, not one per connection
// and two per frame.
//
// With TLS (Options.TLS) both ends authenticate: the port asks for and verifies the peer's
// certificate against the peer CA, and a node connecting verifies the certificate of the peer it
// dials against the same CA and the host name it dials, and presents its own. A process without a
// certificate of that CA can neither join nor send a Raft message.
//
// On the wire, after TLS: the connecting node sends an 8-byte preface ("CDRAFT", a version and
// the connection's kind: Raft messages or snapshot chunks), then frames, each an 8-byte header
// (the payload's length and its CRC-32C, both big-endian) and the payload, a marshalled
// raftpb.MessageBatch or raftpb.Chunk.
package raftnet
