package cli

import (
	"errors"

	"github.com/trellisnet/trellis/internal/cluster"
)

// Exit statuses of trellis, other than 0 (done) and, for exec, the command's own.
const (
	// ExitError is every error not listed below.
	ExitError = 1
	// ExitOvertaken: up --cluster committed its generation, but another up replaced it (or a
	// down removed the network) before it converged (cluster.ErrOvertaken).
	ExitOvertaken = 3
)

// ExitStatus is the exit status for an error a command returned.
func ExitStatus(err error) int {
	if errors.Is(err, cluster.ErrOvertaken) {
		return ExitOvertaken
	}
	return ExitError
}
