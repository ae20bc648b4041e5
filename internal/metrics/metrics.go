// Package metrics exports what runs on this machine in the Prometheus text format, read live
// from the kernel at each scrape (so a scrape costs nothing between scrapes and never shows a
// stale network): per port and direction frames, bytes and
// drops, shaper and impairment drops, link and port state, per node CPU time, memory,
// processes and OOM kills (its cgroup), tunnel devices and EGRE decapsulation counters, and
// how long `up` through the API took and how often it failed.
// Labels are network, node, link, interface and machine. The live metrics are written straight
// in the text format (text.go); client_golang's registry serves the others.
package metrics

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
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
	c.registry.MustRegister(c.upSeconds, c.upErrors, collectors.NewGoCollector(),
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

// Handler serves the metrics (for /metrics): the registry's (reconcile durations and errors,
// the Go runtime and the process), then what is read live from the kernel, gzipped (at the
// fastest level) if the client accepts it, as Prometheus does.
func (c *Collector) Handler() http.Handler { return http.HandlerFunc(c.serve) }

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	snap, err := c.read()
	if err != nil {
		http.Error(w, "reading the networks: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var out bytes.Buffer
	mfs, err := c.registry.Gather()
	if err != nil {
		http.Error(w, "gathering: "+err.Error(), http.StatusInternalServerError)
		return
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&out, mf); err != nil {
			http.Error(w, "encoding: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	snap.out.addFloat(famScrape, time.Since(start).Seconds())
	snap.out.writeTo(&out)
	w.Header().Set("Content-Type", contentType)
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Write(out.Bytes())
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level
	zw.Write(out.Bytes())
	zw.Close()
}

// contentType is the Prometheus text format's.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Names are the names of the metrics trellis exports (the families of its own metrics; a
// histogram's series add _bucket, _sum and _count), for dashboards and their tests.
func Names() []string {
	out := []string{"trellis_reconcile_duration_seconds", "trellis_reconcile_errors_total"}
	for _, f := range families {
		out = append(out, f.name)
	}
	return out
}
