package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"google.golang.org/grpc"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
	"github.com/coordinatord/coordinatord/internal/record"
)

// Kind is the RPC a phase sends.
type Kind string

// The phase kinds.
const (
	// KindWrite sends WriteShareGroupState (durable: answered after fdatasync).
	KindWrite Kind = "write"
	// KindHealth sends grpc.health.v1.Health/Check (the baseline: no durable work).
	KindHealth Kind = "health"
)

// ParseKind returns the Kind named s.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindWrite, KindHealth:
		return k, nil
	}
	return "", fmt.Errorf("unknown phase %q: want %q or %q", s, KindWrite, KindHealth)
}

// DefaultTopicID is the topic id of the written share partitions unless Config.TopicID says
// otherwise: the in-process benchmarks' workload.DefaultTopic.
var DefaultTopicID = workload.DefaultTopic.String()

// Config describes a run.
type Config struct {
	Target          string        // host:port of the gRPC listener
	Connections     int           // client connections, shared round-robin by the callers
	Concurrency     int           // calls in flight
	Keys            int           // share partitions written (write phase)
	BatchesPerWrite int           // state batches per write
	Duration        time.Duration // recorded time per phase
	Warmup          time.Duration // unrecorded time before each phase's recording
	GroupID         string        // group of the written share partitions
	TopicID         string        // topic id of the written share partitions ("" → DefaultTopicID)
	Phases          []Kind        // phases in order (nil → health, then write)

	// Progress, when set, receives one line per ProgressEvery (default 1 s) while a phase runs.
	Progress      io.Writer
	ProgressEvery time.Duration

	// DialOptions replace the default (plaintext) client options.
	DialOptions []grpc.DialOption

	// Cluster sends the writes (and the initializing calls) through the client package, which
	// asks Target who leads each key's state partition and sends the key there: for a cluster,
	// whose nodes serve only the partitions they lead. The health phase still calls Target.
	Cluster bool
}

func (c Config) withDefaults() Config {
	if c.TopicID == "" {
		c.TopicID = DefaultTopicID
	}
	if len(c.Phases) == 0 {
		c.Phases = []Kind{KindHealth, KindWrite}
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = time.Second
	}
	return c
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Target == "" {
		errs = append(errs, errors.New("target: want host:port of a coordinatord gRPC listener"))
	}
	if c.Connections < 1 {
		errs = append(errs, fmt.Errorf("connections %d: want at least 1", c.Connections))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: want at least 1", c.Concurrency))
	}
	if c.Keys < 1 || c.Keys > math.MaxInt32+1 {
		// The share partitions are numbered 0 to keys-1, and a partition number is an int32.
		errs = append(errs, fmt.Errorf("keys %d: want 1 to %d", c.Keys, math.MaxInt32+1))
	}
	if c.BatchesPerWrite < 1 {
		errs = append(errs, fmt.Errorf("batches per write %d: want at least 1", c.BatchesPerWrite))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %v: want more than 0", c.Duration))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warm-up %v: want 0 or more", c.Warmup))
	}
	if c.GroupID == "" {
		errs = append(errs, errors.New("group: want a group id"))
	}
	if _, err := record.ParseTopicID(c.TopicID); err != nil {
		errs = append(errs, fmt.Errorf("topic id: %w", err))
	}
	seen := map[Kind]bool{}
	for _, k := range c.Phases {
		if _, err := ParseKind(string(k)); err != nil {
			errs = append(errs, err)
		}
		if seen[k] {
			errs = append(errs, fmt.Errorf("phase %q is listed twice", k))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}
