package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a client of QEMU's machine protocol (QMP), for hot-plugging ports.
type qmp struct {
	conn net.Conn
	rd   *bufio.Reader
}

type qmpMessage struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
	Data  struct {
		Device string `json:"device"`
	} `json:"data"`
}

func dialQMP(ctx context.Context, socket string) (*qmp, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("QEMU monitor: %w", err)
	}
	m := &qmp{conn: conn, rd: bufio.NewReader(conn)}
	if _, err := m.read(ctx); err != nil { // the greeting
		conn.Close()
		return nil, err
	}
	if _, err := m.execute(ctx, "qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return m, nil
}

func (m *qmp) Close() error { return m.conn.Close() }

func (m *qmp) read(ctx context.Context) (*qmpMessage, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(30 * time.Second)
	}
	_ = m.conn.SetReadDeadline(dl)
	line, err := m.rd.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("QEMU monitor: %w", err)
	}
	var msg qmpMessage
	if err := json.Unmarshal(line, &msg); err != nil {
		return nil, fmt.Errorf("QEMU monitor: %w", err)
	}
	return &msg, nil
}

// execute runs a command and returns its answer, skipping events.
func (m *qmp) execute(ctx context.Context, cmd string, args any) (*qmpMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	data, _ := json.Marshal(req)
	if _, err := m.conn.Write(append(data, '\n')); err != nil {
		return nil, fmt.Errorf("QEMU monitor: %w", err)
	}
	return m.reply(ctx, cmd)
}

// answer waits for the answer to command cmd, sent already.
func (m *qmp) answer(ctx context.Context, cmd string) error {
	_, err := m.reply(ctx, cmd)
	return err
}

// reply reads the answer to command cmd, skipping events.
func (m *qmp) reply(ctx context.Context, cmd string) (*qmpMessage, error) {
	for {
		msg, err := m.read(ctx)
		if err != nil {
			return nil, err
		}
		if msg.Event != "" {
			continue
		}
		if msg.Error != nil {
			return msg, fmt.Errorf("QEMU monitor: %s: %s", cmd, msg.Error.Desc)
		}
		return msg, nil
	}
}

// hmp runs a human-monitor command (the same option strings as QEMU's command line).
func (m *qmp) hmp(ctx context.Context, line string) error {
	msg, err := m.execute(ctx, "human-monitor-command", map[string]string{"command-line": line})
	if err != nil {
		return err
	}
	var out string
	if json.Unmarshal(msg.Return, &out) == nil && strings.TrimSpace(out) != "" {
		return fmt.Errorf("QEMU monitor: %s: %s", line, strings.TrimSpace(out))
	}
	return nil
}

// getfd gives QEMU the open file f under name, for a later command of this monitor.
func (m *qmp) getfd(ctx context.Context, name string, f *os.File) error {
	uc, ok := m.conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("QEMU monitor: %T passes no files", m.conn)
	}
	data, _ := json.Marshal(map[string]any{"execute": "getfd", "arguments": map[string]string{"fdname": name}})
	if _, _, err := uc.WriteMsgUnix(append(data, '\n'), unix.UnixRights(int(f.Fd())), nil); err != nil {
		return fmt.Errorf("QEMU monitor: getfd: %w", err)
	}
	return m.answer(ctx, "getfd")
}

// netdevAdd adds a back end given as on QEMU's command line ("tap,id=x,fd=name,vhost=on")
// through this monitor, so that it finds the files getfd gave it.
func (m *qmp) netdevAdd(ctx context.Context, opts string) error {
	args := map[string]any{}
	for i, kv := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case i == 0:
			args["type"] = k
		case v == "on" || v == "off":
			args[k] = v == "on"
		default:
			args[k] = v
		}
	}
	_, err := m.execute(ctx, "netdev_add", args)
	return err
}

// unplug removes NIC id and its back end, waiting until the guest has let the NIC go; a
// missing NIC is fine.
func (m *qmp) unplug(ctx context.Context, id string) error {
	msg, err := m.execute(ctx, "qom-get", map[string]string{"path": "/machine/peripheral/" + id, "property": "netdev"})
	if err != nil {
		return nil // no such device
	}
	var netdev string
	_ = json.Unmarshal(msg.Return, &netdev)
	if _, err := m.execute(ctx, "device_del", map[string]string{"id": id}); err != nil {
		return err
	}
	for {
		msg, err := m.read(ctx)
		if err != nil {
			return fmt.Errorf("unplugging %s: %w", id, err)
		}
		if msg.Event == "DEVICE_DELETED" && msg.Data.Device == id {
			break
		}
	}
	if netdev == "" {
		return nil
	}
	_, err = m.execute(ctx, "netdev_del", map[string]string{"id": netdev})
	return err
}
