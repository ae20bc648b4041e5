package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/trellisnet/trellis/internal/capture"
	"golang.org/x/net/bpf"
)

type captureInput struct {
	Network  string  `path:"network" doc:"the network's name" example:"ospf-ring"`
	Link     string  `path:"link" doc:"the link's name, as inspect lists it" example:"r1:eth1--r2:eth1"`
	Endpoint string  `query:"endpoint" pattern:"^[^:]+:[^:]+$" example:"r1:eth1" doc:"only the frames this endpoint sends and receives, NODE:IF"`
	Filter   string  `query:"filter" example:"icmp or ospf" doc:"a pcap filter expression, as tcpdump takes it"`
	Count    int     `query:"count" minimum:"0" doc:"stop after this many frames (0: no limit)"`
	Seconds  float64 `query:"seconds" minimum:"0" doc:"stop after this many seconds (0: no limit)"`
	Format   string  `query:"format" enum:"pcapng,pcap" default:"pcapng" doc:"pcapng names each frame's node interface and direction; pcap has neither"`
}

type captureOutput struct {
	Body func(huma.Context)
}

// Media types of the two formats.
const (
	mediaPcapng = "application/x-pcapng"
	mediaPcap   = "application/vnd.tcpdump.pcap"
)

func (s *Server) registerCapture() {
	huma.Register(s.api, huma.Operation{OperationID: "capture", Method: http.MethodGet, Path: "/networks/{network}/links/{link}/capture",
		Summary: "Record a link's frames, both directions, as a pcapng (or pcap) stream",
		Description: "As `trellis capture NETWORK LINK [--endpoint NODE:IF] [-c COUNT] [FILTER]`: read from the link's ports, nothing inside the nodes. " +
			"The stream goes on until count frames, seconds, or the client closes it; each frame is sent as it is read.",
		Responses: map[string]*huma.Response{"200": {Description: "the capture", Content: map[string]*huma.MediaType{
			mediaPcapng: {Schema: &huma.Schema{Type: "string", Format: "binary"}},
			mediaPcap:   {Schema: &huma.Schema{Type: "string", Format: "binary"}},
		}}},
	}, s.capture)
}

// capture checks the filter and the link (a 422 or 404 problem) and then streams.
func (s *Server) capture(ctx context.Context, in *captureInput) (*captureOutput, error) {
	if s.cl != nil {
		return nil, s.notInCluster("capture")
	}
	var filter []bpf.RawInstruction
	if expr := strings.TrimSpace(in.Filter); expr != "" {
		var err error
		if filter, err = capture.CompileFilter(expr, capture.Snaplen); err != nil {
			status := http.StatusUnprocessableEntity
			if errors.Is(err, capture.ErrNoTcpdump) {
				status = http.StatusInternalServerError
			}
			return nil, newProblem(status, err.Error(), &huma.ErrorDetail{Message: err.Error(), Location: "query.filter", Value: expr})
		}
	}
	plan, err := capture.ForLink(s.st, in.Network, in.Link, in.Endpoint)
	if err != nil {
		return nil, problemOf(err)
	}
	opts := capture.Options{Filter: filter, Count: in.Count, Pcap: in.Format == "pcap"}
	media, ext := mediaPcapng, "pcapng"
	if opts.Pcap {
		media, ext = mediaPcap, "pcap"
	}
	name := fmt.Sprintf("%s_%s.%s", in.Network, strings.NewReplacer(":", "_", "/", "_", "\"", "").Replace(in.Link), ext)
	return &captureOutput{Body: func(hc huma.Context) {
		_, rw := humago.Unwrap(hc)
		w := &streamWriter{hc: hc, rc: http.NewResponseController(rw), media: media, file: name}
		cctx, cancel := context.WithCancel(hc.Context()) // the client going away ends it
		defer cancel()
		stop := context.AfterFunc(s.base, cancel) // and so does the server stopping
		defer stop()
		if in.Seconds > 0 {
			var c context.CancelFunc
			cctx, c = context.WithTimeout(cctx, time.Duration(in.Seconds*float64(time.Second)))
			defer c()
		}
		_, err := capture.Run(cctx, plan, w, opts)
		if err != nil && !w.started {
			// Nothing sent yet (a port is missing, a socket refused): a problem instead.
			huma.WriteErr(s.api, hc, http.StatusInternalServerError, err.Error())
			return
		}
		if !w.started {
			w.start() // no frame and no error can only be a capture stopped at once
		}
	}}, nil
}

// streamWriter sends the response's headers with its first bytes, and flushes every write,
// so that a capture that fails before it starts can still be answered with a problem.
type streamWriter struct {
	hc          huma.Context
	rc          *http.ResponseController
	media, file string
	started     bool
}

func (w *streamWriter) start() {
	w.started = true
	w.hc.SetHeader("Content-Type", w.media)
	w.hc.SetHeader("Content-Disposition", fmt.Sprintf("attachment; filename=%q", w.file))
	w.hc.SetHeader("Cache-Control", "no-store")
	w.hc.SetStatus(http.StatusOK)
}

func (w *streamWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.start()
	}
	n, err := w.hc.BodyWriter().Write(b)
	if err == nil {
		err = w.rc.Flush()
	}
	return n, err
}
