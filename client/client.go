package client

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// Defaults of Options.
const (
	// DefaultCallTimeout bounds a call whose context has no deadline (Kafka's request.timeout.ms).
	DefaultCallTimeout = 30 * time.Second
	// DefaultInitialBackoff is the first wait before a retry (Kafka's retry.backoff.ms).
	DefaultInitialBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff caps the wait between retries (Kafka's retry.backoff.max.ms).
	DefaultMaxBackoff = time.Second
	// DefaultCacheSize is how many coordinator keys the client remembers the state partition of.
	DefaultCacheSize = 100_000
	// DefaultInFlightPerNode is how many reads, and how many writes, of one group the client
	// keeps outstanding to one node at most. A lane sends a second request only while its newest
	// stalls (see Options.InFlightPerNode), so under a steady load it keeps one, as Kafka's share
	// persister does, which wrote a fifth more at 64 writes in flight than four sent eagerly
	// (docs/benchmarks.md, section 11); with four allowed, a request that a lossy link stalls
	// does not hold back every call of its group to that node (with one, and 20 % of one node's
	// packets lost, no call of the group succeeded for 6 s).
	DefaultInFlightPerNode = 4
)

// ErrClosed is returned by every call made after Close.
var ErrClosed = errors.New("coordinatord client: closed")

// Backoff is the exponential backoff between two attempts of a call: the n-th retry that waits
// (see Retry.Backoff) waits a random duration between half and all of min(Initial·2ⁿ⁻¹, Max),
// so that callers failing together do not retry together.
type Backoff struct {
	// Initial is the wait before the first retry; zero means DefaultInitialBackoff.
	Initial time.Duration
	// Max caps the wait; zero means DefaultMaxBackoff, or Initial when that is larger.
	Max time.Duration
}

// Options configures a Client. Only Bootstrap and the transport credentials in DialOptions are
// required.
type Options struct {
	// Bootstrap lists "host:port" gRPC addresses of any coordinatord nodes. The client asks them
	// which node leads each key's state partition; it need not name every node.
	Bootstrap []string
	// DialOptions are used for every connection, to the bootstrap nodes and to the nodes that
	// FindCoordinator names. They must choose the transport credentials:
	// grpc.WithTransportCredentials(credentials.NewTLS(...)), or insecure.NewCredentials() for a
	// plaintext server.
	DialOptions []grpc.DialOption
	// Logger receives debug lines on retries and lookups; nil logs nothing.
	Logger *zap.Logger
	// RetryBackoff is the wait between attempts of a call that met a retriable error.
	RetryBackoff Backoff
	// CallTimeout bounds a call whose context has no deadline; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// AttemptTimeout bounds each request to one node, so that a node that stops answering
	// costs one attempt rather than the whole call; zero leaves requests bounded by the call's
	// deadline only.
	AttemptTimeout time.Duration
	// CacheSize bounds how many coordinator keys' state partitions are remembered (least
	// recently used are forgotten first); zero means DefaultCacheSize.
	CacheSize int
	// InFlightPerNode bounds the ReadShareGroupState and the WriteShareGroupState requests of one
	// group the client keeps outstanding to one node, each method on its own. A call whose
	// request finds one outstanding waits (unless all that are out stalled, see below, and
	// nothing waits: then it goes at once); when it returns, every request that waited meanwhile
	// goes out as one, each call getting exactly its own partitions' answers, as if it had been
	// sent alone. Only while the newest outstanding request has been out for twice the usual
	// round trip of its node, method and group (and at least a millisecond) does what waits go
	// out in another, up to InFlightPerNode: a stalled request holds nothing back for long.
	// Nothing waits at one call in flight; under load, one request carries many calls and its
	// cost on the client and the node is paid once. Two calls naming the same partition never
	// share a request, and a call whose context carries outgoing gRPC metadata is always sent
	// alone. Zero means DefaultInFlightPerNode; a negative value turns coalescing off: every
	// call sends its own requests at once.
	InFlightPerNode int
	// OnRetry, when set, is called before every retry of a call, on the calling goroutine. It
	// may be called concurrently by concurrent calls and must return quickly.
	OnRetry func(Retry)
}

// Retry describes one retry of a call, for Options.OnRetry.
type Retry struct {
	// Method is the RPC's name, e.g. "WriteShareGroupState".
	Method string
	// Attempt is the number of the attempt about to be made: 2 for the first retry.
	Attempt int
	// Partitions is how many partitions the attempt sends again.
	Partitions int
	// Codes counts those partitions by the retriable error each last got. A node that could not
	// be reached counts as COORDINATOR_NOT_AVAILABLE, one that did not answer in time as
	// REQUEST_TIMED_OUT.
	Codes map[pb.ErrorCode]int
	// Backoff is the wait before the attempt: zero when NOT_COORDINATOR answers are followed at
	// once.
	Backoff time.Duration
}

// Stats are counters of a Client's work since New; see Client.Stats.
type Stats struct {
	// Calls counts the state calls made (one per method call).
	Calls uint64
	// Requests counts the state requests sent to nodes: one per node per attempt, or fewer when
	// calls are coalesced.
	Requests uint64
	// Coalesced counts the calls' requests that went out together with another call's, in one
	// request (see Options.InFlightPerNode).
	Coalesced uint64
	// Lookups counts the FindCoordinator requests sent.
	Lookups uint64
	// Retries counts the attempts after the first, over all calls.
	Retries uint64
	// RetriedPartitions counts the partitions sent again after a retriable error.
	RetriedPartitions uint64
	// Redirects counts, of those, the partitions sent again after NOT_COORDINATOR.
	Redirects uint64
	// Exhausted counts the partitions returned with a retriable error because the call's
	// deadline came first.
	Exhausted uint64
}

// counters are the atomic form of Stats.
type counters struct {
	calls, requests, coalesced, lookups, retries, retried, redirects, exhausted atomic.Uint64
}

// Client is a coordinatord client that sends each key to the node leading its state partition.
// It is safe for concurrent use; Close releases its connections.
type Client struct {
	opts   Options
	logger *zap.Logger
	routes *routes
	stats  counters

	mu     sync.Mutex
	closed bool
	conns  map[string]*grpc.ClientConn // by "host:port"

	lanesMu    sync.Mutex
	lanes      map[laneKey]any      // *lane of the key's method, while it has requests out
	partLimits map[partLimitKey]int // coalesced request sizes nodes refused, halved
}

// New returns a Client for the cluster reachable at opts.Bootstrap. It checks the options and
// creates the connection object of the first bootstrap address, so that bad DialOptions (no
// transport credentials, say) fail here; no network I/O happens until the first call.
func New(opts Options) (*Client, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		opts:       opts,
		logger:     opts.Logger,
		routes:     newRoutes(opts.CacheSize),
		conns:      make(map[string]*grpc.ClientConn),
		lanes:      make(map[laneKey]any),
		partLimits: make(map[partLimitKey]int),
	}
	if _, err := c.conn(opts.Bootstrap[0]); err != nil {
		return nil, err
	}
	return c, nil
}

// withDefaults checks o and fills in the defaults of its zero fields.
func (o Options) withDefaults() (Options, error) {
	if len(o.Bootstrap) == 0 {
		return o, errors.New("coordinatord client: Options.Bootstrap must name at least one host:port")
	}
	o.Bootstrap = append([]string(nil), o.Bootstrap...)
	for _, a := range o.Bootstrap {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return o, fmt.Errorf("coordinatord client: bootstrap address %q is not host:port", a)
		}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	b := &o.RetryBackoff
	switch {
	case b.Initial < 0, b.Max < 0, o.CallTimeout < 0, o.AttemptTimeout < 0, o.CacheSize < 0:
		return o, errors.New("coordinatord client: RetryBackoff, CallTimeout, AttemptTimeout and CacheSize must not be negative")
	}
	if b.Initial == 0 {
		b.Initial = DefaultInitialBackoff
	}
	if b.Max == 0 {
		b.Max = max(DefaultMaxBackoff, b.Initial)
	}
	if b.Max < b.Initial {
		return o, fmt.Errorf("coordinatord client: RetryBackoff.Max %v is below RetryBackoff.Initial %v", b.Max, b.Initial)
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.InFlightPerNode == 0 {
		o.InFlightPerNode = DefaultInFlightPerNode
	}
	return o, nil
}

// conn returns the connection to addr, creating it on first use.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, c.opts.DialOptions...)
	if err != nil {
		return nil, fmt.Errorf("coordinatord client: connect to %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

// stub returns the ShareCoordinatorService client of addr.
func (c *Client) stub(addr string) (pb.ShareCoordinatorServiceClient, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewShareCoordinatorServiceClient(cc), nil
}

// Close closes every connection of the client. Calls in flight fail; later calls return
// ErrClosed. Close is safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for addr, cc := range c.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection to %s: %w", addr, err))
		}
	}
	c.conns = nil
	return errors.Join(errs...)
}

// Stats returns the client's counters. They only grow; benchmarks report their differences.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Calls:             s.calls.Load(),
		Requests:          s.requests.Load(),
		Coalesced:         s.coalesced.Load(),
		Lookups:           s.lookups.Load(),
		Retries:           s.retries.Load(),
		RetriedPartitions: s.retried.Load(),
		Redirects:         s.redirects.Load(),
		Exhausted:         s.exhausted.Load(),
	}
}
