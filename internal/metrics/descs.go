package metrics

var (
	portLabels   = []string{"network", "node", "link", "interface", "machine"}
	nodeLabels   = []string{"network", "node", "machine"}
	linkLabels   = []string{"network", "link", "machine"}
	tunnelLabels = []string{"network", "link", "remote_host", "machine"}
	egreLabels   = []string{"machine"}

	famNetwork = newFamily("trellis_network_info", gauge, "A network of this machine's state directory; status is up, creating or changing.",
		"network", "status", "machine")
	famNodeUp = newFamily("trellis_node_up", gauge, "1 if the node runs, 0 if it does not.", nodeLabels...)
	// What a node uses, from its cgroup (for node kinds that tell it: containers).
	famCPU       = newFamily("trellis_node_cpu_seconds_total", counter, "CPU time the node's processes used since it started.", nodeLabels...)
	famMemory    = newFamily("trellis_node_memory_bytes", gauge, "Memory the node uses, page cache and tmpfs files included.", nodeLabels...)
	famProcesses = newFamily("trellis_node_processes", gauge, "Processes and threads of the node.", nodeLabels...)
	famOOMKills  = newFamily("trellis_node_oom_kills_total", counter, "Processes of the node the kernel killed for its memory limit.", nodeLabels...)

	famLinkUp = newFamily("trellis_link_up", gauge, "1 if the link has carrier (state up), 0 if it was taken down.", linkLabels...)
	famPortUp = newFamily("trellis_port_up", gauge, "1 if the port gives its interface carrier, 0 if not.", portLabels...)
	// Counters of a link's interface as its node sees it: rx is what it received from the link,
	// tx what it sent into the link.
	famRxFrames = newFamily("trellis_port_rx_frames_total", counter, "Frames the node's interface received from the link.", portLabels...)
	famTxFrames = newFamily("trellis_port_tx_frames_total", counter, "Frames the node's interface sent into the link.", portLabels...)
	famRxBytes  = newFamily("trellis_port_rx_bytes_total", counter, "Bytes the node's interface received from the link.", portLabels...)
	famTxBytes  = newFamily("trellis_port_tx_bytes_total", counter, "Bytes the node's interface sent into the link.", portLabels...)
	famRxDrops  = newFamily("trellis_port_rx_drops_total", counter, "Frames for the node's interface that the kernel dropped on receipt.", portLabels...)
	famTxDrops  = newFamily("trellis_port_tx_drops_total", counter, "Frames the node's interface could not send.", portLabels...)
	famShaper   = newFamily("trellis_port_shaper_drops_total", counter, "Frames the port's rate shaper dropped.", portLabels...)
	famImpDrop  = newFamily("trellis_port_impairment_drops_total", counter, "Frames the interface sent that the link's loss impairment dropped.", portLabels...)
	famImpDup   = newFamily("trellis_port_impairment_duplicates_total", counter, "Duplicates of the interface's frames the link's impairment sent.", portLabels...)
	famImpCorr  = newFamily("trellis_port_impairment_corrupted_total", counter, "Frames of the interface the link's impairment corrupted.", portLabels...)

	famTunRxFrames = newFamily("trellis_tunnel_rx_frames_total", counter, "Frames the link's tunnel device to another machine received.", tunnelLabels...)
	famTunTxFrames = newFamily("trellis_tunnel_tx_frames_total", counter, "Frames the link's tunnel device to another machine sent.", tunnelLabels...)
	famTunRxBytes  = newFamily("trellis_tunnel_rx_bytes_total", counter, "Bytes the link's tunnel device to another machine received.", tunnelLabels...)
	famTunTxBytes  = newFamily("trellis_tunnel_tx_bytes_total", counter, "Bytes the link's tunnel device to another machine sent.", tunnelLabels...)

	famDecap  = newFamily("trellis_egre_decapsulated_total", counter, "EGRE packets the machine's decapsulation program handed to their port.", egreLabels...)
	famUnkKey = newFamily("trellis_egre_unknown_key_drops_total", counter, "EGRE packets dropped because no tunnel has their key.", egreLabels...)
	famWrong  = newFamily("trellis_egre_wrong_source_drops_total", counter, "EGRE packets dropped because their key belongs to tunnels with other machines.", egreLabels...)
	famDecErr = newFamily("trellis_egre_errors_total", counter, "EGRE packets dropped because a kernel helper failed.", egreLabels...)
	famVXRef  = newFamily("trellis_vxlan_refused_total", counter, "VXLAN packets dropped because their VNI belongs to tunnels with other machines.", egreLabels...)

	famScrape = newFamily("trellis_scrape_duration_seconds", gauge, "How long reading the networks from the kernel took for this scrape.")

	// families are the live metrics in the order a scrape writes them.
	families = []*family{famNetwork, famNodeUp, famCPU, famMemory, famProcesses, famOOMKills, famLinkUp, famPortUp, famRxFrames, famTxFrames, famRxBytes,
		famTxBytes, famRxDrops, famTxDrops, famShaper, famImpDrop, famImpDup, famImpCorr,
		famTunRxFrames, famTunTxFrames, famTunRxBytes, famTunTxBytes, famDecap, famUnkKey, famWrong, famDecErr, famVXRef, famScrape}
)
