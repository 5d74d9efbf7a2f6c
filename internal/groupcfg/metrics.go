package groupcfg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Manager's Prometheus series.
type metrics struct {
	reg     prometheus.Registerer
	clamped *prometheus.GaugeVec
	counts  map[string]int
	owned   bool // registered by this Manager (and so unregistered by Close)
}

// newMetrics creates sharecoord_group_config_clamped and registers it on reg (nil: not
// registered). A collector already registered under that name is reused, so that a Manager can
// be reopened in the same process.
func newMetrics(reg prometheus.Registerer, sch *schema) (*metrics, error) {
	m := &metrics{
		reg: reg,
		clamped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_group_config_clamped",
			Help: "Stored group config overrides whose effective value is currently clamped to the broker bounds in force, by config.",
		}, []string{"config"}),
		counts: map[string]int{},
	}
	if reg != nil {
		err := reg.Register(m.clamped)
		var are prometheus.AlreadyRegisteredError
		switch {
		case err == nil:
			m.owned = true
		case errors.As(err, &are):
			existing, ok := are.ExistingCollector.(*prometheus.GaugeVec)
			if !ok {
				return nil, fmt.Errorf("register sharecoord_group_config_clamped: a different collector has that name")
			}
			m.clamped = existing
		default:
			return nil, fmt.Errorf("register sharecoord_group_config_clamped: %w", err)
		}
	}
	for _, i := range sch.group {
		if d := &sch.defs[i]; isNumeric(d.Type) {
			m.clamped.WithLabelValues(d.Name).Set(0)
			m.counts[d.Name] = 0
		}
	}
	return m, nil
}

// addClamped counts one override of config becoming clamped (up) or no longer clamped.
func (m *metrics) addClamped(config string, up bool) {
	if up {
		m.counts[config]++
	} else {
		m.counts[config]--
	}
	m.clamped.WithLabelValues(config).Set(float64(m.counts[config]))
}

func (m *metrics) unregister() {
	if m.owned {
		m.reg.Unregister(m.clamped)
		m.owned = false
	}
}
