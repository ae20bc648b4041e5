package plan

import (
	"fmt"
	"regexp"
)

// Names are the device names allocated to a network's objects on one machine, by identity
// ("port/LINK/NODE:IF", "link/LINK", "tunnel/LINK/HOST"). A new object gets the next number,
// which is never given again, so a name always means the same object and an edited file
// renames nothing. The record of the network keeps them.
type Names struct {
	// NetID is the network's id on the machine, which starts every device name: the substrate
	// allocates it when the network is created (substrate.saveNew); "" derives it from the
	// scope and the network's name (NetID).
	NetID string         `json:",omitempty"`
	Next  int            // the number the next new object gets
	IDs   map[string]int // identity -> number
}

// device returns the device name of the object id, allocating a number if it has none.
func (a *Names) device(netID string, kind byte, id string) string {
	if a.IDs == nil {
		a.IDs = map[string]int{}
	}
	n, ok := a.IDs[id]
	if !ok {
		n = a.Next
		a.IDs[id] = n
		a.Next++
	}
	return DeviceName(netID, kind, n)
}

// Keep forgets the numbers of objects that plan p no longer holds (their devices are gone
// once p is applied); numbers are still never given again.
func (a *Names) Keep(p *Plan) {
	used := map[string]bool{}
	for _, l := range p.Links {
		used["link/"+l.Name] = true
		for _, port := range l.Ports {
			used["port/"+l.Name+"/"+port.String()] = true
		}
		for _, t := range l.Tunnels {
			used["tunnel/"+l.Name+"/"+t.Host], used["tunnel/"+l.Name] = true, true
		}
	}
	for _, n := range p.Nodes {
		for i, m := range n.FEPorts {
			for ifname := range m {
				used[EngineID(n.Name, i, ifname)] = true
			}
		}
	}
	for id := range a.IDs {
		if !used[id] {
			delete(a.IDs, id)
		}
	}
}

// Clone returns a copy that can be allocated from without changing a.
func (a *Names) Clone() *Names {
	c := &Names{NetID: a.NetID, Next: a.Next, IDs: make(map[string]int, len(a.IDs))}
	for k, v := range a.IDs {
		c.IDs[k] = v
	}
	return c
}

// DeviceName names a substrate device: "tr", the network's id, a kind letter (p port, b
// connector device, t and u tunnel devices, e an engine's copy of a node interface, h and r
// the ends of a port's delay pair) and a number. It fits IFNAMSIZ up to a million.
func DeviceName(netID string, kind byte, n int) string {
	return fmt.Sprintf("tr%s%c%d", netID, kind, n)
}

// DeviceKind returns the kind letter of a substrate device name made by DeviceName, or 0.
func DeviceKind(dev string) byte {
	if deviceRE.MatchString(dev) {
		return dev[8]
	}
	return 0
}

var deviceRE = regexp.MustCompile(`^tr([0-9a-f]{6})[pbtuvehr][0-9]+$`)

// DelayPair names the two ends of the delay pair of the port called port (see
// internal/delay): its hold end (h) and its return end (r), with the port's number.
func DelayPair(port string) (hold, ret string) {
	if DeviceKind(port) != 'p' {
		return "", ""
	}
	return port[:8] + "h" + port[9:], port[:8] + "r" + port[9:]
}

// DeviceNetID returns the network id in a substrate device name, or "" if trellis did not
// name the device.
func DeviceNetID(dev string) string {
	m := deviceRE.FindStringSubmatch(dev)
	if m == nil {
		return ""
	}
	return m[1]
}
