package vm

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/vmsock"
)

// Attach runs argv on a terminal in the guest through the agent's terminal port (trellis exec
// with a terminal), one session per VM at a time: a new one hangs up the one before.
func (Kind) Attach(ctx context.Context, env *kinds.Env, in kinds.Instance, argv []string, size [2]uint16, stdin io.Reader, stdout io.Writer, resize <-chan [2]uint16) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", vmsock.Path(env.Store.ID, env.Plan.NetID, in.Name, vmsock.TTY))
	if err != nil {
		return 0, fmt.Errorf("%w: terminal of %s: %v", guest.ErrAgent, in.Name, err)
	}
	defer conn.Close()
	var mu sync.Mutex // frames go whole
	send := func(typ byte, v any, raw []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if raw != nil {
			return guest.WriteFrame(conn, typ, raw)
		}
		return guest.WriteJSONFrame(conn, typ, v)
	}
	if err := send(guest.FrameStart, guest.Session{Argv: argv, Size: guest.Size{Rows: size[0], Cols: size[1]}}, nil); err != nil {
		return 0, err
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 && send(guest.FrameData, nil, buf[:n]) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		for sz := range resize {
			if send(guest.FrameResize, guest.Size{Rows: sz[0], Cols: sz[1]}, nil) != nil {
				return
			}
		}
	}()
	go func() { <-ctx.Done(); conn.Close() }()
	for {
		typ, payload, err := guest.ReadFrame(conn)
		if err != nil {
			return 0, fmt.Errorf("%w: terminal of %s: %v", guest.ErrAgent, in.Name, err)
		}
		switch typ {
		case guest.FrameData:
			stdout.Write(payload)
		case guest.FrameExit:
			if len(payload) == 4 {
				return int(int32(binary.BigEndian.Uint32(payload))), nil
			}
		}
	}
}
