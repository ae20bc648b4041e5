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
	vhost := ""
	if vhostNet() {
		vhost = ",vhost=on"
	}
	cases := []struct {
		name       string
		vm         *spec.VMSettings
		fds        []string
		netdev     string
		deviceTail string
	}{
		{"tap by default", nil, nil, "tap,id=tr0a0b0cp7,ifname=tr0a0b0cp7,script=no,downscript=no" + vhost, ",id=nic-eth1,host_mtu=1400"},
		{"tap, two queues", &spec.VMSettings{Interconnect: "tap", Queues: 2}, nil,
			"tap,id=tr0a0b0cp7,ifname=tr0a0b0cp7,script=no,downscript=no,queues=2" + vhost, ",host_mtu=1400,mq=on,vectors=6"},
		{"macvtap", &spec.VMSettings{Interconnect: "macvtap"}, []string{"3"}, "tap,id=tr0a0b0cp7,fd=3" + vhost, ",host_mtu=1400"},
		{"macvtap, two queues", &spec.VMSettings{Interconnect: "macvtap", Queues: 2, QueueSize: 512}, []string{"x-0", "x-1"},
			"tap,id=tr0a0b0cp7,fds=x-0:x-1" + vhost, ",mq=on,vectors=6,rx_queue_size=512"},
		{"bridge: QEMU's tap beside the port", &spec.VMSettings{Interconnect: "bridge"}, nil,
			"tap,id=tr0a0b0cp7,ifname=tr0a0b0cm7,script=no,downscript=no" + vhost, ",host_mtu=1400"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			netdev, device := newPort(port, 1400, c.vm).qemuDevices(c.fds)
			if netdev != c.netdev {
				t.Errorf("netdev %q, want %q", netdev, c.netdev)
			}
			if !strings.HasPrefix(device, "virtio-net-pci,netdev=tr0a0b0cp7,mac=02:00:00:00:00:07,") || !strings.HasSuffix(device, c.deviceTail) {
				t.Errorf("device %q, want the NIC with ...%s", device, c.deviceTail)
			}
		})
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
		vm   *spec.VMSettings
		want []string
	}{
		{"trellis's image", nil, []string{"-kernel", "/cache/vmlinuz", "-initrd", "/cache/initrd", "-append", cmd}},
		{"user's kernel, trellis's initramfs", &spec.VMSettings{Kernel: "/k", Append: "nokaslr"},
			[]string{"-kernel", "/k", "-initrd", "/cache/initrd", "-append", cmd + " nokaslr"}},
		{"user's kernel and initrd", &spec.VMSettings{Kernel: "/k", Initrd: "/i"},
			[]string{"-kernel", "/k", "-initrd", "/i", "-append", cmd}},
		{"knobs only", &spec.VMSettings{Queues: 2}, []string{"-kernel", "/cache/vmlinuz", "-initrd", "/cache/initrd", "-append", cmd}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := boot(img, "r1", c.vm); !reflect.DeepEqual(got, c.want) {
				t.Errorf("boot = %q, want %q", got, c.want)
			}
		})
	}
}
