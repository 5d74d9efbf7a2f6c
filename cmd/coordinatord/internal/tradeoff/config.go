package tradeoff

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordinatord/internal/workload"
)

// The validator's range of share.coordinator.snapshot.update.records.per.snapshot. Limits outside
// it need Config.AllowOutOfRange.
const (
	ValidatorMin = 200
	ValidatorMax = 1000
)

// DefaultLimits are the limits studied unless told otherwise: the proposal's set plus the
// validator's bounds.
var DefaultLimits = []int{200, 500, 1000, 2000, 5000, 10000, 25000, 50000}

// Config describes a study.
type Config struct {
	Shape               workload.Shape
	IdleSharePartitions int // share partitions written once, then never again

	Limits          []int
	AllowOutOfRange bool   // permit limits outside [ValidatorMin, ValidatorMax]
	Cold            []bool // cold-partition snapshot modes to run for each limit (false: off, true: on)
	ColdInterval    time.Duration

	Concurrency int           // writes in flight
	Rate        float64       // measured writes per second; 0: as fast as possible
	Writes      int64         // measured writes per run; 0 (and no Duration): one snapshot cycle
	Duration    time.Duration // measured time per run, instead of Writes

	DataDir      string // runs use fresh directories under it, removed afterwards unless Keep
	Keep         bool
	SegmentBytes int64
	DropCaches   bool // drop the page cache before each replay (Linux, root)

	Progress io.Writer // one line per run phase; nil: none
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if err := c.Shape.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.IdleSharePartitions < 0 {
		errs = append(errs, fmt.Errorf("idle share partitions %d: want 0 or more", c.IdleSharePartitions))
	}
	if len(c.Limits) == 0 {
		errs = append(errs, errors.New("limits: want at least one"))
	}
	for _, l := range c.Limits {
		switch {
		case l < 0:
			errs = append(errs, fmt.Errorf("limit %d: want 0 or more", l))
		case (l < ValidatorMin || l > ValidatorMax) && !c.AllowOutOfRange:
			errs = append(errs, fmt.Errorf("limit %d is outside the validator's range [%d, %d]: pass --allow-out-of-range-limits to study it", l, ValidatorMin, ValidatorMax))
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(c.Limits)))) != len(c.Limits) {
		errs = append(errs, errors.New("limits: each limit may be listed once"))
	}
	if len(c.Cold) == 0 {
		errs = append(errs, errors.New("cold-partition snapshot modes: want off, on or both"))
	}
	if slices.Contains(c.Cold, true) && c.ColdInterval <= 0 {
		errs = append(errs, fmt.Errorf("cold interval %v: want more than 0 when cold-partition snapshots are on", c.ColdInterval))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: want at least 1", c.Concurrency))
	}
	if !(c.Rate >= 0) || math.IsInf(c.Rate, 1) {
		errs = append(errs, fmt.Errorf("rate %v: want 0 (as fast as possible) or more", c.Rate))
	}
	if c.Writes < 0 {
		errs = append(errs, fmt.Errorf("writes %d: want 0 (one snapshot cycle) or more", c.Writes))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("duration %v: want 0 or more", c.Duration))
	}
	if c.Writes > 0 && c.Duration > 0 {
		errs = append(errs, errors.New("writes and duration: give one of them, not both"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir: want a directory for the runs' logs"))
	}
	if c.SegmentBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("segment bytes %d: want at least 1024", c.SegmentBytes))
	}
	return errors.Join(errs...)
}

// measuredWrites is the number of writes the measurement of a run at limit makes (0: it runs
// for Duration).
func (c Config) measuredWrites(limit int) int64 {
	switch {
	case c.Duration > 0:
		return 0
	case c.Writes > 0:
		return c.Writes
	}
	return max(int64(c.Shape.SharePartitions)*int64(limit+1), 1000)
}
