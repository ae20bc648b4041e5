package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/noderuntime/nodeinit"
	"golang.org/x/sys/unix"
)

// Main is the agent: the guest's first process. mirror serves the route mirror's port (nil:
// none; internal/enginehelper.ServeGuest, given by the caller, as engines needs kinds that need
// this package). It never returns; if it cannot serve, it says why on the console and powers
// the guest off, which ends QEMU (-no-reboot), so the host sees the node gone.
func Main(mirror func(port io.ReadWriter) error) {
	fmt.Fprintln(os.Stderr, "trellis guest agent:", serve(mirror))
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

// serve returns only why it cannot go on.
func serve(mirror func(port io.ReadWriter) error) error {
	if err := boot(); err != nil {
		return err
	}
	if name := cmdline("trellis.node"); name != "" {
		if err := unix.Sethostname([]byte(name)); err != nil {
			return err
		}
	}
	if err := setLoopback(nil); err != nil {
		return err
	}
	port, err := openPort(PortName, 60*time.Second)
	if err != nil {
		return err
	}
	a := &agent{procs: newProcs()}
	go a.serveTTY()
	if mirror != nil {
		go serveMirror(mirror)
	}
	fmt.Fprintln(os.Stderr, "trellis guest agent: ready")
	in := bufio.NewReader(port)
	out := json.NewEncoder(port)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			// The host closed its end: the port reads EOF until it connects again.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			_ = out.Encode(Response{Error: "bad request: " + err.Error()})
			continue
		}
		resp := a.handle(&req)
		resp.ID = req.ID
		if err := out.Encode(resp); err != nil {
			return err
		}
	}
}

type agent struct{ procs *procs }

// MirrorPortName is the virtio-serial port of the route mirror (internal/enginehelper, vmguest.go).
const MirrorPortName = "trellis.mirror"

// serveMirror serves the mirror port with mirror, on which a VM node's engines helper watches
// the routes of the node's own VM and applies them in its engine VMs.
func serveMirror(mirror func(port io.ReadWriter) error) {
	port, err := openPort(MirrorPortName, 60*time.Second)
	if err == nil {
		err = mirror(port)
	}
	fmt.Fprintln(os.Stderr, "trellis guest agent: mirror port:", err)
}

func (a *agent) handle(req *Request) (resp Response) {
	var err error
	switch req.Op {
	case "ping":
	case "setup":
		err = setup(req)
	case "configure":
		if req.Iface == nil {
			err = fmt.Errorf("configure without an interface")
		} else {
			err = configure(req.Iface)
		}
	case "exec":
		resp, err = a.exec(req)
	case "links":
		resp.Links, err = links()
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		resp.Error = err.Error()
	}
	return resp
}

// setup writes the node's files, sets its sysctls and gives loopback its addresses.
func setup(req *Request) error {
	if req.Hostname != "" {
		if err := unix.Sethostname([]byte(req.Hostname)); err != nil {
			return err
		}
	}
	for _, f := range req.Files { // as in a container node: owners from the guest's /etc
		if err := nodeinit.WriteFile(nodeinit.File{Path: f.Path, Content: f.Content, Mode: f.Mode, Owner: f.Owner}); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
	}
	if err := sysctl(req.Sysctl); err != nil {
		return err
	}
	return setLoopback(req.Lo)
}

func sysctl(values map[string]string) error {
	for k, v := range values {
		path := "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	return nil
}

// exec runs one command. With req.Log its output is appended to that file, else returned.
func (a *agent) exec(req *Request) (Response, error) {
	if len(req.Argv) == 0 {
		return Response{}, fmt.Errorf("exec without a command")
	}
	ctx := context.Background()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	stdin, err := tempWith(req.Stdin)
	if err != nil {
		return Response{}, err
	}
	defer stdin.Close()
	var stdout, stderr *os.File
	if req.Log != "" {
		if stdout, err = os.OpenFile(req.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return Response{}, err
		}
		stderr = stdout
	} else {
		if stdout, err = tempWith(""); err != nil {
			return Response{}, err
		}
		if stderr, err = tempWith(""); err != nil {
			return Response{}, err
		}
		defer stderr.Close()
	}
	defer stdout.Close()
	code, err := a.procs.run(ctx, req.Argv, stdin, stdout, stderr)
	resp := Response{Exit: code}
	if req.Log == "" {
		resp.Stdout, resp.Stderr = readAll(stdout), readAll(stderr)
	}
	return resp, err
}

// tempWith returns an unlinked file holding content, at its start. Files, not pipes: a daemon
// started by the command keeps its output open, and the agent must not wait for that.
func tempWith(content string) (*os.File, error) {
	f, err := os.CreateTemp("/run", "exec")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return nil, err
	}
	_, err = f.Seek(0, 0)
	return f, err
}

func readAll(f *os.File) string {
	if _, err := f.Seek(0, 0); err != nil {
		return ""
	}
	var sb strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		sb.Write(buf[:n])
		if err != nil || sb.Len() > 16<<20 {
			return sb.String()
		}
	}
}
