package groupcfg

import (
	"fmt"
	"strconv"
)

// bounds are the values a numeric group key accepts now: its own range narrowed by the broker
// keys named in MinKey and MaxKey, at their values in force.
type bounds struct {
	lo, hi       int64
	loKey, hiKey string // the broker key that sets the bound; "" when the key's own range does
	loSrc, hiSrc ConfigSource
}

// groupBounds returns the bounds in force for the numeric group key d.
func groupBounds(d *Definition, b *brokerState) bounds {
	bn := bounds{}
	bn.lo, bn.hi = staticRange(d)
	if d.MinKey != "" {
		if v, ok := b.get(d.MinKey); ok && v.num >= bn.lo {
			bn.lo, bn.loKey, bn.loSrc = v.num, d.MinKey, b.source[b.schema.index[d.MinKey]]
		}
	}
	if d.MaxKey != "" {
		if v, ok := b.get(d.MaxKey); ok && v.num <= bn.hi {
			bn.hi, bn.hiKey, bn.hiSrc = v.num, d.MaxKey, b.source[b.schema.index[d.MaxKey]]
		}
	}
	return bn
}

// explain says where both bounds come from, for messages and logs.
func (bn bounds) explain(d *Definition) string {
	lower := fmt.Sprintf("the lower bound %d is fixed", bn.lo)
	if bn.loKey != "" {
		lower = fmt.Sprintf("the lower bound is %s=%d (%s)", bn.loKey, bn.lo, bn.loSrc)
	}
	upper := fmt.Sprintf("the upper bound %d is fixed", bn.hi)
	switch {
	case bn.hiKey != "" && bn.hiKey == d.Synonym:
		upper = fmt.Sprintf("the upper bound is the broker ceiling %s=%d (%s)", bn.hiKey, bn.hi, bn.hiSrc)
	case bn.hiKey != "":
		upper = fmt.Sprintf("the upper bound is %s=%d (%s)", bn.hiKey, bn.hi, bn.hiSrc)
	}
	return lower + " and " + upper
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }
