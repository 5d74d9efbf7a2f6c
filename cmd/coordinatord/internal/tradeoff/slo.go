package tradeoff

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SLO is the operational objectives of the proposal's rule. A zero field is not checked.
type SLO struct {
	MaxReplaySeconds   float64 // failover replay time, at most
	MaxGrowthPerSecond float64 // log growth in bytes per second, at most
	// WriteRate is the write rate (writes per second) at which log growth is judged: a run's
	// growth is its bytes per write × WriteRate. 0 judges the growth the run itself measured,
	// which only means something for a paced study (Config.Rate): unpaced, it follows how fast
	// the machine happened to write.
	WriteRate float64
}

// Growth is the log growth per second of r that the SLO judges.
func (s SLO) Growth(r Row) float64 {
	if s.WriteRate > 0 {
		return r.GrowthBytesPerWrite() * s.WriteRate
	}
	return r.GrowthBytesPerSecond()
}

// Meets reports whether r satisfies every objective that is set.
func (s SLO) Meets(r Row) bool {
	if s.MaxReplaySeconds > 0 && r.ReplaySeconds > s.MaxReplaySeconds {
		return false
	}
	if s.MaxGrowthPerSecond > 0 && s.Growth(r) > s.MaxGrowthPerSecond {
		return false
	}
	return true
}

// Ceiling applies the proposal's rule to the rows of one cold mode: the largest limit whose run
// meets every objective. ok is false when no run does.
func (s SLO) Ceiling(rows []Row, cold bool) (limit int, ok bool) {
	for _, r := range rows {
		if r.Cold == cold && s.Meets(r) && (!ok || r.Limit > limit) {
			limit, ok = r.Limit, true
		}
	}
	return limit, ok
}

// WriteVerdict prints, for each cold mode present in rows, the measured curve (replay time and
// log growth per limit, each marked against its objective) and the largest limit meeting both.
func (s SLO) WriteVerdict(w io.Writer, rows []Row) error {
	var b strings.Builder
	at := "as measured"
	if s.WriteRate > 0 {
		at = fmt.Sprintf("at %.0f writes/s", s.WriteRate)
	}
	fmt.Fprintf(&b, "Rule: the largest limit whose failover replay time is at most %s and whose log growth (%s) is at most %s.\n",
		orUnset(s.MaxReplaySeconds, Seconds), at, orUnset(s.MaxGrowthPerSecond, func(v float64) string { return Bytes(v) + "/s" }))
	for _, cold := range []bool{false, true} {
		present := false
		for _, r := range rows {
			present = present || r.Cold == cold
		}
		if !present {
			continue
		}
		fmt.Fprintf(&b, "\ncold-partition snapshots %s:\n\n| limit | replay | log growth | meets both |\n|---:|---:|---:|:---:|\n", Mode(cold))
		for _, r := range rows {
			if r.Cold != cold {
				continue
			}
			mark := "no"
			if s.Meets(r) {
				mark = "yes"
			}
			fmt.Fprintf(&b, "| %d | %s | %s/s | %s |\n", r.Limit, Seconds(r.ReplaySeconds), Bytes(s.Growth(r)), mark)
		}
		if limit, ok := s.Ceiling(rows, cold); ok {
			fmt.Fprintf(&b, "\nlargest limit meeting both (cold snapshots %s): %d\n", Mode(cold), limit)
			if limit == largestLimit(rows, cold) {
				fmt.Fprintf(&b, "(the largest limit studied: the ceiling may be higher; study larger limits to find it)\n")
			}
			if below := s.missedBelow(rows, cold, limit); len(below) > 0 {
				fmt.Fprintf(&b, "(but smaller limits miss: %s; the curve is not monotone there, so repeat those runs before relying on it)\n", below)
			}
		} else {
			fmt.Fprintf(&b, "\nno measured limit meets both (cold snapshots %s)\n", Mode(cold))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orUnset(v float64, f func(float64) string) string {
	if v <= 0 {
		return "(not set)"
	}
	return f(v)
}

// largestLimit is the largest limit of the rows of one cold mode.
func largestLimit(rows []Row, cold bool) int {
	l := 0
	for _, r := range rows {
		if r.Cold == cold {
			l = max(l, r.Limit)
		}
	}
	return l
}

// missedBelow lists the limits under limit, in one cold mode, whose runs miss an objective.
func (s SLO) missedBelow(rows []Row, cold bool, limit int) string {
	var missed []string
	for _, r := range rows {
		if r.Cold == cold && r.Limit < limit && !s.Meets(r) {
			missed = append(missed, strconv.Itoa(r.Limit))
		}
	}
	return strings.Join(missed, ", ")
}
