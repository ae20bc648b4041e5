package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// Problem is the body of every error response: RFC 9457 problem details, as huma writes them
// (media type application/problem+json), whose errors carry, for a problem in a topology file,
// the same file, line, field, message and fix as the CLI prints.
type Problem struct {
	Type     string           `json:"type,omitempty" format:"uri" default:"about:blank" doc:"A URI reference to documentation of the problem type."`
	Title    string           `json:"title,omitempty" example:"Unprocessable Entity" doc:"The HTTP status text."`
	Status   int              `json:"status,omitempty" example:"422" doc:"The HTTP status code."`
	Detail   string           `json:"detail,omitempty" example:"the topology file has 1 problem; nothing was changed" doc:"What went wrong, for a person."`
	Instance string           `json:"instance,omitempty" format:"uri" doc:"A URI reference to this occurrence of the problem."`
	Errors   []*ProblemDetail `json:"errors,omitempty" doc:"Each problem found, in file order for a topology file."`
}

// ProblemDetail is one problem: in a topology file (file, line, field, message, fix, as the
// CLI's FILE:LINE: FIELD: message; fix), or in the request (location and value, as huma's
// request validation gives them).
type ProblemDetail struct {
	Message  string `json:"message" doc:"What is wrong."`
	Location string `json:"location,omitempty" example:"body" doc:"Where in the request: body, query.host, path.network, ..."`
	Value    any    `json:"value,omitempty" doc:"The value at that location."`
	File     string `json:"file,omitempty" example:"ring.yaml" doc:"The topology file (the request's file parameter)."`
	Line     int    `json:"line,omitempty" example:"7" doc:"The line of the file, from 1; absent when not known."`
	Field    string `json:"field,omitempty" example:"links[0].rate" doc:"The key of the file."`
	Fix      string `json:"fix,omitempty" example:"write a rate as tc writes it: 500kbit, 10mbit, 1gbit" doc:"How to fix it."`
}

func (p *Problem) Error() string { return p.Detail }

// GetStatus is the HTTP status of the response (huma.StatusError).
func (p *Problem) GetStatus() int { return p.Status }

// ContentType makes JSON problems application/problem+json (huma.ContentTypeFilter).
func (p *Problem) ContentType(ct string) string {
	if ct == "application/json" {
		return "application/problem+json"
	}
	return ct
}

func init() {
	// huma makes every error response it writes, its own request validation's included,
	// through NewError, and documents the error schema from what NewError returns.
	huma.NewError = newProblem
}

// newProblem makes a Problem of status with detail msg and the problems errs.
func newProblem(status int, msg string, errs ...error) huma.StatusError {
	p := &Problem{Status: status, Title: http.StatusText(status), Detail: msg}
	for _, err := range errs {
		if err != nil {
			p.Errors = append(p.Errors, detailOf(err))
		}
	}
	return p
}

// detailOf turns one error into a ProblemDetail.
func detailOf(err error) *ProblemDetail {
	var se *spec.Error
	if errors.As(err, &se) {
		return &ProblemDetail{Message: se.Msg, Location: "body", File: se.File, Line: se.Line, Field: se.Field, Fix: se.Fix}
	}
	var hd huma.ErrorDetailer
	if errors.As(err, &hd) {
		d := hd.ErrorDetail()
		return &ProblemDetail{Message: d.Message, Location: d.Location, Value: d.Value}
	}
	return &ProblemDetail{Message: err.Error()}
}

// problemOf maps an error of the layers below to its HTTP status: problems in the topology
// file are 422 with every problem listed; an unknown network or link 404; a network another
// command is changing, one not up, or a node that does not run 409; anything else (the kernel refused, a node's command failed) 500.
func problemOf(err error) error {
	var ses spec.Errors
	var se *spec.Error
	switch {
	case errors.As(err, &ses):
		errs := make([]error, len(ses))
		for i, e := range ses {
			errs[i] = e
		}
		return newProblem(http.StatusUnprocessableEntity, fmt.Sprintf("the topology file has %s; nothing was changed", count(len(ses), "problem")), errs...)
	case errors.As(err, &se):
		return newProblem(http.StatusUnprocessableEntity, "the topology file has 1 problem; nothing was changed", se)
	case errors.Is(err, substrate.ErrNoNetwork), errors.Is(err, substrate.ErrNoLink), errors.Is(err, ErrNoNode):
		return newProblem(http.StatusNotFound, err.Error())
	case errors.Is(err, ErrKindNoTerminal):
		return newProblem(http.StatusNotImplemented, err.Error())
	case errors.Is(err, state.ErrBusy), errors.Is(err, substrate.ErrNotUp), errors.Is(err, ErrNodeDown),
		errors.Is(err, substrate.ErrReplug):
		return newProblem(http.StatusConflict, err.Error())
	}
	return newProblem(http.StatusInternalServerError, err.Error())
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
