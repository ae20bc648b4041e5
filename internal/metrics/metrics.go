// Package metrics exports what runs on this machine in the Prometheus text format, read live
// from the kernel at each scrape (a custom prometheus.Collector, so a scrape costs nothing
// between scrapes and never shows a stale network): per port and direction frames, bytes and
// drops, shaper and impairment drops, link and port state, tunnel devices and EGRE
// decapsulation counters, and how long `up` through the API took and how often it failed.
// Labels are network, node, link, interface and machine.
package metrics

import (
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/trellisnet/trellis/internal/state"
)

// Collector collects the metrics of one state directory.
type Collector struct {
	st        *state.Store
	machine   string // this machine's name, for networks without hosts
	upSeconds *prometheus.HistogramVec
	upErrors  *prometheus.CounterVec
	registry  *prometheus.Registry
}

// New returns the collector of state directory st, registered with a registry of its own
// along with the Go runtime and process collectors.
func New(st *state.Store) *Collector {
	machine, _ := os.Hostname()
	c := &Collector{st: st, machine: machine,
		upSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "trellis_reconcile_duration_seconds",
			Help:    "How long an up (create or live change) through the API took, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12)}, []string{"network"}),
		upErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_reconcile_errors_total",
			Help: "Ups through the API that failed."}, []string{"network"}),
		registry: prometheus.NewRegistry(),
	}
	c.registry.MustRegister(c, c.upSeconds, c.upErrors, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return c
}

// ObserveUp records how an up of network went (the api.Options.Observe hook).
func (c *Collector) ObserveUp(network string, took time.Duration, err error) {
	c.upSeconds.WithLabelValues(network).Observe(took.Seconds())
	if err != nil {
		c.upErrors.WithLabelValues(network).Inc()
	} else {
		c.upErrors.WithLabelValues(network).Add(0) // the series exists from the first up
	}
}

// Handler serves the metrics (for /metrics).
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.registry, promhttp.HandlerOpts{ErrorLog: nil, ErrorHandling: promhttp.ContinueOnError})
}

// Describe sends the descriptions of the live metrics.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect reads every network of the state directory from the kernel.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	snap, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descNetwork, err)
		return
	}
	snap.emit(ch)
}
