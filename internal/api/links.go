package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
)

// LinkImpairment is what a link does to the frames of one direction, or of every direction:
// percentages from 0 to 100, as a topology file's loss, duplicate and corrupt keys give them, and
// durations as its delay and jitter keys write them.
type LinkImpairment struct {
	Loss            float64 `json:"loss,omitempty" minimum:"0" maximum:"100" example:"5" doc:"percent of frames dropped"`
	LossCorrelation float64 `json:"loss_correlation,omitempty" minimum:"0" maximum:"100" doc:"percent: how likely a frame shares the previous frame's fate (bursts of loss)"`
	Duplicate       float64 `json:"duplicate,omitempty" minimum:"0" maximum:"100" doc:"percent of frames sent twice"`
	Corrupt         float64 `json:"corrupt,omitempty" minimum:"0" maximum:"100" doc:"percent of frames with a flipped bit"`
	Delay           string  `json:"delay,omitempty" example:"10ms" doc:"how long each frame is held back, as a topology file writes it (e.g. 10ms, 1.5s)"`
	Jitter          string  `json:"jitter,omitempty" example:"2ms" doc:"how much the delay varies (the distribution's spread); needs a delay"`
	Distribution    string  `json:"distribution,omitempty" enum:"uniform,normal,pareto,paretonormal" doc:"of the jitter (uniform unless given)"`
	Endpoint        string  `json:"endpoint,omitempty" pattern:"^[^:]+:[^:]+$" example:"r1:eth1" doc:"only the frames this endpoint (NODE:IF) sends; the other directions are unchanged"`
}

type impairmentInput struct {
	Network string `path:"network" doc:"the network's name"`
	Link    string `path:"link" doc:"the link's name, as inspect lists it" example:"r1:eth1--r2:eth1"`
	Replug  bool   `query:"replug" doc:"impair a direct link even if re-plugging it to ports takes away what the nodes' software made on its interfaces; without it, that is refused (409)"`
	Body    LinkImpairment
}

type impairmentOutput struct {
	Body impairmentResult
}

type impairmentResult struct {
	LinkImpairment
	Replugged
}

func (s *Server) registerLinks() {
	huma.Register(s.api, huma.Operation{OperationID: "set-link-impairments", Method: http.MethodPut, Path: "/networks/{network}/links/{link}/impairments",
		Summary: "Set a link's loss, duplication, corruption, delay and jitter, live",
		Description: "As `trellis link NETWORK LINK set loss=5% ... [--endpoint NODE:IF]`: the impairments given replace the link's in every direction " +
			"(keys left out are 0; an empty object removes them), or with endpoint only those of the frames that endpoint sends. " +
			"Loss, duplication and corruption are applied in eBPF on the ports at once; delay and jitter by netem, or trellis's delay line on a kernel without netem. " +
			"They stay until the next up of the file."}, s.impairments)
}

func (s *Server) impairments(ctx context.Context, in *impairmentInput) (*impairmentOutput, error) {
	if s.cl != nil {
		return nil, s.notInCluster("impairments")
	}
	b := in.Body
	im, err := impairmentOf(b)
	if err != nil {
		return nil, err
	}
	if err := s.networkExists(in.Network); err != nil {
		return nil, err
	}
	var note strings.Builder
	if err := substrate.SetImpairment(s.base, s.st, in.Network, in.Link, b.Endpoint, im, s.substrate(in.Replug, logline.Logger(&note, nil))); err != nil {
		return nil, problemOf(err)
	}
	return &impairmentOutput{Body: impairmentResult{b, Replugged{note.String()}}}, nil
}

// impairmentOf reads a body's impairment; a delay, jitter or distribution that a topology file
// would refuse is refused (422) naming the field.
func impairmentOf(b LinkImpairment) (spec.Impairment, error) {
	im := spec.Impairment{Loss: b.Loss, LossCorrelation: b.LossCorrelation, Duplicate: b.Duplicate, Corrupt: b.Corrupt}
	for _, kv := range [][2]string{{"delay", b.Delay}, {"jitter", b.Jitter}, {"distribution", b.Distribution}} {
		if kv[1] == "" {
			continue
		}
		if err := im.Set(kv[0], kv[1]); err != nil {
			return im, huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{Location: "body." + kv[0], Message: err.Error(), Value: kv[1]})
		}
	}
	if err := im.Check(); err != nil {
		key, _, _ := strings.Cut(err.Error(), ":")
		return im, huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{Location: "body." + key, Message: err.Error()})
	}
	return im, nil
}

// networkExists returns a 404 problem unless the state directory has the network (the
// substrate's live changes would leave a lock file for one that does not exist).
func (s *Server) networkExists(network string) error {
	if rec, err := s.st.Load(network); err != nil || rec == nil {
		return problemOf(errors.Join(err, fmt.Errorf("%w %s in %s", substrate.ErrNoNetwork, network, s.st.Dir)))
	}
	return nil
}
