package tlsconfig

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
)

// Handshake failures are logged one by one up to handshakeLogBurst per handshakeLogWindow; the
// rest of the window's failures are counted and summed up in one line when the window ends, so
// that a misconfigured client retrying in a loop (or a scanner) cannot flood the log.
const (
	handshakeLogBurst  = 5
	handshakeLogWindow = time.Minute
)

// LogHandshakeFailures returns creds with every server-side handshake that fails logged at WARN
// with the client's address and the reason (an unknown CA, no client certificate where one is
// required, a client that does not speak TLS, ...): gRPC itself drops such a connection without
// a word. The first few failures of each minute are logged one by one, the others summed up in one
// line at the end of that minute. Client handshakes are not logged.
func LogHandshakeFailures(logger *zap.Logger, creds credentials.TransportCredentials) credentials.TransportCredentials {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &loggedCreds{TransportCredentials: creds, log: newHandshakeLog(logger, time.Now, time.AfterFunc)}
}

// loggedCreds are TransportCredentials that report failed server handshakes to log.
type loggedCreds struct {
	credentials.TransportCredentials
	log *handshakeLog
}

// ServerHandshake runs the wrapped handshake and logs its failure.
func (c *loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil && !errors.Is(err, credentials.ErrConnDispatched) {
		c.log.failed(conn.RemoteAddr(), err)
	}
	return out, info, err
}

// Clone clones the wrapped credentials; the clone reports to the same log, so that the limit
// holds for the process.
func (c *loggedCreds) Clone() credentials.TransportCredentials {
	return &loggedCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log}
}

// handshakeLog logs handshake failures, at most handshakeLogBurst per window one by one, and
// the count of the others when their window ends. now and afterFunc are time.Now and
// time.AfterFunc outside tests.
type handshakeLog struct {
	logger    *zap.Logger
	now       func() time.Time
	afterFunc func(time.Duration, func()) *time.Timer

	mu         sync.Mutex
	start      time.Time // of the current window
	logged     int       // failures logged one by one in it
	suppressed int       // failures counted, not logged, in it
	summary    bool      // a summary of the window is scheduled
}

func newHandshakeLog(logger *zap.Logger, now func() time.Time, afterFunc func(time.Duration, func()) *time.Timer) *handshakeLog {
	return &handshakeLog{logger: logger, now: now, afterFunc: afterFunc}
}

// failed records one failed handshake with the client at remote.
func (h *handshakeLog) failed(remote net.Addr, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if now.Sub(h.start) >= handshakeLogWindow {
		h.summarizeLocked()
		h.start, h.logged = now, 0
	}
	if h.logged < handshakeLogBurst {
		h.logged++
		fields := []zap.Field{zap.String("remote", addrString(remote)), zap.String("reason", handshakeReason(err))}
		if h.logged == handshakeLogBurst {
			fields = append(fields, zap.String("note", "further failures this minute are counted and logged as one line at its end"))
		}
		h.logger.Warn("TLS handshake failed; the connection was closed", fields...)
		return
	}
	h.suppressed++
	if !h.summary {
		h.summary = true
		start := h.start
		h.afterFunc(start.Add(handshakeLogWindow).Sub(now), func() { h.summarize(start) })
	}
}

// summarize logs the count of the failures of the window that began at start not logged one by
// one, unless a later failure has ended that window (and logged it) already.
func (h *handshakeLog) summarize(start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.start.Equal(start) {
		h.summarizeLocked()
	}
}

func (h *handshakeLog) summarizeLocked() {
	h.summary = false
	if h.suppressed == 0 {
		return
	}
	h.logger.Warn("more TLS handshakes failed than were logged one by one",
		zap.Int("not_logged", h.suppressed), zap.Int("logged", h.logged), zap.Time("since", h.start))
	h.suppressed = 0
}

// handshakeReason says why a handshake failed, in the words of crypto/tls where it has them.
func handshakeReason(err error) string {
	if errors.Is(err, io.EOF) {
		return "the client closed the connection during the handshake (EOF)"
	}
	return err.Error()
}

func addrString(a net.Addr) string {
	if a == nil {
		return "unknown"
	}
	return a.String()
}
