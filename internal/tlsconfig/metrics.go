package tlsconfig

import "github.com/prometheus/client_golang/prometheus"

// metrics are the metrics of the node certificate.
type metrics struct {
	notAfter prometheus.Gauge
	reloads  *prometheus.CounterVec
}

// newMetrics returns the metrics, registered with reg unless it is nil.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		notAfter: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sharecoord_tls_certificate_not_after_seconds",
			Help: "Expiry (Unix time) of the server certificate in use; alert well before it passes.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_tls_reloads_total",
			Help: "Reloads of the TLS certificate, key and client CA files after they changed or on SIGHUP, by result.",
		}, []string{"result"}),
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	if reg != nil {
		reg.MustRegister(m.notAfter, m.reloads)
	}
	return m
}

func (m *metrics) observe(t *material) {
	m.notAfter.Set(float64(t.leaf.NotAfter.Unix()))
}
