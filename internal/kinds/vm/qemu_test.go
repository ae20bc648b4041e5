package vm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

func TestQEMUDevices(t *testing.T) {
	port := plan.Port{Name: "tr0a0b0cp7", Ifname: "eth1", MAC: "02:00:00:00:00:07"}
	cases := []struct {
		name       string
		vm         *Settings
		fds, vhost []string
		netdev     string
		deviceTail string
	}{
		{"one queue", nil, []string{"3"}, nil, "tap,id=tr0a0b0cp7,fd=3", ",id=nic-eth1,host_mtu=1400"},
		{"two queues", &Settings{Queues: 2}, []string{"3", "4"}, nil,
			"tap,id=tr0a0b0cp7,fds=3:4", ",host_mtu=1400,mq=on,vectors=6"},
		{"vhost-net", nil, []string{"3"}, []string{"4"}, "tap,id=tr0a0b0cp7,fd=3,vhost=on,vhostfd=4", ",host_mtu=1400"},
		{"hot-plugged, two queues and vhost-net", &Settings{Interconnect: "macvtap", Queues: 2, QueueSize: 512},
			[]string{"x-q0", "x-q1"}, []string{"x-v0", "x-v1"},
			"tap,id=tr0a0b0cp7,fds=x-q0:x-q1,vhost=on,vhostfds=x-v0:x-v1", ",mq=on,vectors=6,rx_queue_size=512"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			netdev, device := newPort(port, 1400, c.vm).qemuDevices(c.fds, c.vhost)
			if netdev != c.netdev {
				t.Errorf("netdev %q, want %q", netdev, c.netdev)
			}
			if !strings.HasPrefix(device, "virtio-net-pci,netdev=tr0a0b0cp7,mac=02:00:00:00:00:07,") || !strings.HasSuffix(device, c.deviceTail) {
				t.Errorf("device %q, want the NIC with ...%s", device, c.deviceTail)
			}
		})
	}
}

func TestTapName(t *testing.T) {
	port := plan.Port{Name: "tr0a0b0cp7"}
	for ic, want := range map[string]string{"tap": "tr0a0b0cp7", "macvtap": "tr0a0b0cp7", "bridge": "tr0a0b0cm7"} {
		if got := newPort(port, 0, &Settings{Interconnect: ic}).tapName(); got != want {
			t.Errorf("%s: tap %s, want %s", ic, got, want)
		}
	}
}

// QEMU runs sandboxed as its network's uid, listening only on path sockets.
func TestArgsSandbox(t *testing.T) {
	n := &plan.Node{Node: &spec.Node{Name: "r1"}}
	a := strings.Join(args(image.Image{}, "m", "70:70", func(w string) string { return "/d/" + w }, "/log", n, nil), " ")
	for _, want := range []string{"-sandbox on,obsolete=deny,spawn=deny,resourcecontrol=deny", "-runas 70:70",
		"socket,id=qmp,path=/d/qmp,server=on,wait=off", "socket,id=agent,path=/d/agent,server=on,wait=off"} {
		if !strings.Contains(a, want) {
			t.Errorf("QEMU's arguments lack %q: %s", want, a)
		}
	}
	for _, bad := range []string{"abstract", "-daemonize"} {
		if strings.Contains(a, bad) {
			t.Errorf("QEMU's arguments have %q: %s", bad, a)
		}
	}
}

func TestWireNames(t *testing.T) {
	cases := []struct {
		port   string
		letter byte
		want   string
	}{
		{"tr0a0b0cp7", peerLetter, "tr0a0b0cq7"},
		{"tr0a0b0cp123456", guestLetter, "tr0a0b0cm123456"},
		{"tr0a0b0cp0", bridgeLetter, "tr0a0b0cg0"},
	}
	re := wireRE("0a0b0c")
	for _, c := range cases {
		got := wireName(c.port, c.letter)
		if got != c.want {
			t.Errorf("wireName(%s, %c) = %s, want %s", c.port, c.letter, got, c.want)
		}
		if leftover := re.MatchString(got); leftover != (c.letter != guestLetter) {
			t.Errorf("%s swept as a leftover: %v", got, leftover)
		}
		if plan.DeviceNetID(got) != "" {
			t.Errorf("%s is taken for a device the substrate names (it would delete it)", got)
		}
	}
	if wireRE("0a0b0c").MatchString("tr0a0b0dq7") {
		t.Error("another network's peer is swept")
	}
}

func TestBoot(t *testing.T) {
	img := image.Image{Kernel: "/cache/vmlinuz", Initrd: "/cache/initrd"}
	const cmd = "console=ttyS0 panic=-1 quiet trellis.node=r1"
	cases := []struct {
		name string
		vm   *Settings
		want []string
	}{
		{"trellis's image", nil, []string{"-kernel", "/cache/vmlinuz", "-initrd", "/cache/initrd", "-append", cmd}},
		{"user's kernel, trellis's initramfs", &Settings{Kernel: "/k", Append: "nokaslr"},
			[]string{"-kernel", "/k", "-initrd", "/cache/initrd", "-append", cmd + " nokaslr"}},
		{"user's kernel and initrd", &Settings{Kernel: "/k", Initrd: "/i"},
			[]string{"-kernel", "/k", "-initrd", "/i", "-append", cmd}},
		{"knobs only", &Settings{Queues: 2}, []string{"-kernel", "/cache/vmlinuz", "-initrd", "/cache/initrd", "-append", cmd}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := boot(img, "r1", c.vm); !reflect.DeepEqual(got, c.want) {
				t.Errorf("boot = %q, want %q", got, c.want)
			}
		})
	}
}
