package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	portLabels   = []string{"network", "node", "link", "interface", "machine"}
	linkLabels   = []string{"network", "link", "machine"}
	tunnelLabels = []string{"network", "link", "remote_host", "machine"}

	descNetwork = prometheus.NewDesc("trellis_network_info", "A network of this machine's state directory; status is up, creating or changing.",
		[]string{"network", "status", "machine"}, nil)
	descNodeUp = prometheus.NewDesc("trellis_node_up", "1 if the node runs, 0 if it does not.",
		[]string{"network", "node", "machine"}, nil)
	descLinkUp = prometheus.NewDesc("trellis_link_up", "1 if the link has carrier (state up), 0 if it was taken down.", linkLabels, nil)
	descPortUp = prometheus.NewDesc("trellis_port_up", "1 if the port gives its interface carrier, 0 if not.", portLabels, nil)

	// Counters of a link's interface as its node sees it: rx is what it received from the link,
	// tx what it sent into the link.
	descRxFrames = prometheus.NewDesc("trellis_port_rx_frames_total", "Frames the node's interface received from the link.", portLabels, nil)
	descTxFrames = prometheus.NewDesc("trellis_port_tx_frames_total", "Frames the node's interface sent into the link.", portLabels, nil)
	descRxBytes  = prometheus.NewDesc("trellis_port_rx_bytes_total", "Bytes the node's interface received from the link.", portLabels, nil)
	descTxBytes  = prometheus.NewDesc("trellis_port_tx_bytes_total", "Bytes the node's interface sent into the link.", portLabels, nil)
	descRxDrops  = prometheus.NewDesc("trellis_port_rx_drops_total", "Frames for the node's interface that the kernel dropped on receipt.", portLabels, nil)
	descTxDrops  = prometheus.NewDesc("trellis_port_tx_drops_total", "Frames the node's interface could not send.", portLabels, nil)
	descShaper   = prometheus.NewDesc("trellis_port_shaper_drops_total", "Frames the port's rate shaper dropped.", portLabels, nil)
	descImpDrop  = prometheus.NewDesc("trellis_port_impairment_drops_total", "Frames the interface sent that the link's loss impairment dropped.", portLabels, nil)
	descImpDup   = prometheus.NewDesc("trellis_port_impairment_duplicates_total", "Duplicates of the interface's frames the link's impairment sent.", portLabels, nil)
	descImpCorr  = prometheus.NewDesc("trellis_port_impairment_corrupted_total", "Frames of the interface the link's impairment corrupted.", portLabels, nil)

	descTunRxFrames = prometheus.NewDesc("trellis_tunnel_rx_frames_total", "Frames the link's tunnel device to another machine received.", tunnelLabels, nil)
	descTunTxFrames = prometheus.NewDesc("trellis_tunnel_tx_frames_total", "Frames the link's tunnel device to another machine sent.", tunnelLabels, nil)
	descTunRxBytes  = prometheus.NewDesc("trellis_tunnel_rx_bytes_total", "Bytes the link's tunnel device to another machine received.", tunnelLabels, nil)
	descTunTxBytes  = prometheus.NewDesc("trellis_tunnel_tx_bytes_total", "Bytes the link's tunnel device to another machine sent.", tunnelLabels, nil)

	egreLabels = []string{"machine"}
	descDecap  = prometheus.NewDesc("trellis_egre_decapsulated_total", "EGRE packets the machine's decapsulation program handed to their port.", egreLabels, nil)
	descUnkKey = prometheus.NewDesc("trellis_egre_unknown_key_drops_total", "EGRE packets dropped because no tunnel has their key.", egreLabels, nil)
	descWrong  = prometheus.NewDesc("trellis_egre_wrong_source_drops_total", "EGRE packets dropped because their key belongs to tunnels with other machines.", egreLabels, nil)
	descDecErr = prometheus.NewDesc("trellis_egre_errors_total", "EGRE packets dropped because a kernel helper failed.", egreLabels, nil)

	allDescs = []*prometheus.Desc{descNetwork, descNodeUp, descLinkUp, descPortUp, descRxFrames, descTxFrames, descRxBytes,
		descTxBytes, descRxDrops, descTxDrops, descShaper, descImpDrop, descImpDup, descImpCorr,
		descTunRxFrames, descTunTxFrames, descTunRxBytes, descTunTxBytes, descDecap, descUnkKey, descWrong, descDecErr}
)
