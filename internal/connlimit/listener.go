package connlimit

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Reasons for refusing a connection: the reason label of sharecoord_connections_refused_total.
const (
	ReasonMaxConnections = "max_connections"
	ReasonPerIP          = "per_ip"
)

// Limits are the bounds of one listener. Zero values bound nothing.
type Limits struct {
	// MaxConnections bounds the connections held open at once.
	MaxConnections int
	// MaxPerIP bounds the connections held open from one IP address; PerIPOverrides replaces it
	// for the addresses it names (0 refuses an address).
	MaxPerIP       int
	PerIPOverrides map[netip.Addr]int
	// WriteTimeout bounds each write to a client: one blocked longer (the client does not read)
	// fails, and the server using the connection closes it.
	WriteTimeout time.Duration
	// MaxConnectionsKey and MaxPerIPKey name the settings of the bounds in warnings.
	MaxConnectionsKey, MaxPerIPKey string
}

// ParseOverrides reads a list of per-address connection bounds in Kafka's form of
// max.connections.per.ip.overrides, "ADDRESS:COUNT,ADDRESS:COUNT" (an IPv6 address in brackets or
// bare; the count after its last colon). Host names are not accepted: they would be resolved once,
// at start, and silently go stale.
func ParseOverrides(text string) (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	for item := range strings.SplitSeq(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, ':')
		if i < 0 {
			return nil, fmt.Errorf("%q: want ADDRESS:COUNT", item)
		}
		host, countText := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		addr, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not an IP address (host names are not resolved)", item, host)
		}
		n, err := strconv.Atoi(countText)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: %q is not a connection count (a whole number >= 0)", item, countText)
		}
		addr = addr.Unmap()
		if _, dup := out[addr]; dup {
			return nil, fmt.Errorf("%q: address %s is named twice", item, addr)
		}
		out[addr] = n
	}
	return out, nil
}

// Listener is a net.Listener whose connections are bounded by its Limits. Close it as the
// listener it wraps; its connections stay open until they are closed.
type Listener struct {
	net.Listener
	name    string
	limits  Limits
	open    prometheus.Gauge
	refused map[string]prometheus.Counter // by reason
	warn    *zap.Logger

	mu    sync.Mutex
	n     int
	perIP map[netip.Addr]int
	conns map[string]*conn // by remote address
}

// New wraps inner with limits. name is the listener label of the metrics ("grpc", "metrics");
// m, when not nil, receives them; logger, when not nil, the warnings.
func New(inner net.Listener, name string, limits Limits, m *Metrics, logger *zap.Logger) *Listener {
	if logger == nil {
		logger = zap.NewNop()
	}
	l := &Listener{
		Listener: inner, name: name, limits: limits,
		refused: map[string]prometheus.Counter{},
		warn: logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, 10*time.Second, 1, 0)
		})),
		perIP: map[netip.Addr]int{},
		conns: map[string]*conn{},
	}
	if m != nil {
		l.open = m.open.WithLabelValues(name)
		l.open.Set(0)
		for _, r := range []string{ReasonMaxConnections, ReasonPerIP} {
			l.refused[r] = m.refused.WithLabelValues(name, r)
		}
	}
	return l
}

// Accept returns the next connection within the bounds; one past them is closed at once,
// counted and warned of.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, reason := l.admit(c)
		if reason == "" {
			return lc, nil
		}
		// Counted before it is closed, so whoever sees the close also sees the count.
		l.refuse(reason, c.RemoteAddr())
		_ = c.Close()
	}
}

// admit counts c if it is within the bounds, or says which one it is past.
func (l *Listener) admit(c net.Conn) (*conn, string) {
	ip := ipOf(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limits.MaxConnections > 0 && l.n >= l.limits.MaxConnections {
		return nil, ReasonMaxConnections
	}
	if limit, ok := l.perIPLimit(ip); ok && l.perIP[ip] >= limit {
		return nil, ReasonPerIP
	}
	l.n++
	if ip.IsValid() {
		l.perIP[ip]++
	}
	lc := &conn{Conn: c, l: l, ip: ip, key: c.RemoteAddr().String()}
	l.conns[lc.key] = lc
	if l.open != nil {
		l.open.Set(float64(l.n))
	}
	return lc, ""
}

// perIPLimit is the bound of ip's connections, if it has one.
func (l *Listener) perIPLimit(ip netip.Addr) (int, bool) {
	if !ip.IsValid() {
		return 0, false
	}
	if n, ok := l.limits.PerIPOverrides[ip]; ok {
		return n, true
	}
	return l.limits.MaxPerIP, l.limits.MaxPerIP > 0
}

// refuse counts and warns of a connection refused for reason.
func (l *Listener) refuse(reason string, remote net.Addr) {
	if c := l.refused[reason]; c != nil {
		c.Inc()
	}
	key, limit := l.limits.MaxConnectionsKey, l.limits.MaxConnections
	what := "the port holds " + key + " connections"
	if reason == ReasonPerIP {
		key, limit = l.limits.MaxPerIPKey, l.limits.MaxPerIP
		if n, ok := l.limits.PerIPOverrides[ipOf(remote)]; ok {
			limit = n
		}
		what = "its address holds " + key + " connections"
	}
	l.warn.Warn(fmt.Sprintf("%s port: refused a connection: %s (further refusals for this reason within 10 s are not logged; "+
		"sharecoord_connections_refused_total counts them)", l.name, what),
		zap.String("listener", l.name), zap.String("reason", reason), zap.String("peer.address", remote.String()),
		zap.Int(key, limit))
}

// forget stops counting c.
func (l *Listener) forget(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if c.ip.IsValid() {
		if l.perIP[c.ip]--; l.perIP[c.ip] <= 0 {
			delete(l.perIP, c.ip)
		}
	}
	if l.conns[c.key] == c {
		delete(l.conns, c.key)
	}
	if l.open != nil {
		l.open.Set(float64(l.n))
	}
}

// CloseConn closes the connection whose remote address is remote, and reports whether one was
// open.
func (l *Listener) CloseConn(remote net.Addr) bool {
	if remote == nil {
		return false
	}
	l.mu.Lock()
	c := l.conns[remote.String()]
	l.mu.Unlock()
	if c == nil {
		return false
	}
	_ = c.Close()
	return true
}

// Open returns the number of connections held open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// ipOf returns the IP address of a TCP address (IPv4-mapped IPv6 addresses as IPv4), or the zero
// Addr for any other.
func ipOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// conn is a connection counted by its Listener until it is closed.
type conn struct {
	net.Conn
	l    *Listener
	ip   netip.Addr
	key  string
	once sync.Once
}

// Write writes b, failing if the write blocks past the listener's WriteTimeout.
func (c *conn) Write(b []byte) (int, error) {
	if wt := c.l.limits.WriteTimeout; wt > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(wt)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// Close closes the connection and stops counting it.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}
