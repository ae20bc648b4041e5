package enginehelper

import (
	"slices"
)

// remote tells whether engine i of c is held on another machine.
func (c Config) remote(i int) bool {
	_, ok := c.Peers[c.Engines[i].Host]
	return c.Engines[i].Host != "" && ok && c.Home == ""
}

// configure writes the classifier's table over the engines that may take frames (those held
// here, and those on other machines that are connected and copied), when that set changed.
func (h *helper) configure() error {
	live := make([]bool, len(h.fes))
	for i, f := range h.fes {
		live[i] = f.alive()
	}
	if h.live != nil && slices.Equal(live, h.live) {
		return nil
	}
	tc, err := TableLive(h.c.Dispatch, h.c.Engines, live)
	if err != nil {
		return err
	}
	if err := h.dp.Configure(tc); err != nil {
		return err
	}
	h.live = live
	return nil
}

// tendRemotes dials the remote FEs that are not connected and pings the others, each on its
// FE's worker (after the changes queued before), without waiting: a worker that is busy is
// left alone this turn. A holder reached again makes the mirror copy everything anew, after
// which the FE takes frames; one whose ping fails is dropped (call) and takes none.
func (h *helper) tendRemotes() {
	for _, f := range h.fes {
		if f.remote == nil {
			continue
		}
		job := func() {
			if f.remote.connected() {
				f.remote.change(wireReq{Op: opPing})
				return
			}
			if f.dial() == nil {
				select {
				case h.m.resync <- struct{}{}:
				default:
				}
			}
		}
		select {
		case f.work <- job:
		default:
		}
	}
}
