package spec

// Every node of a cluster's network has memory and process limits, so that a tenant's node
// that gives none is neither unlimited on its machine nor free in its tenant's quota
// (docs/cluster.md, "Default limits"). Placement still counts only what the file gives.
const (
	// ClusterMemory is the memory limit of a container node of a cluster without `memory:`.
	ClusterMemory = 256 << 20
	// DefaultPids is a node's process limit without `pids:` (cgroup.DefaultPids, the figure
	// every node with a control group gets); a cluster's nodes have it in their settings.
	DefaultPids = 1024
)

// MemoryLimit is the memory the node may take: its `memory:`, or the default a cluster gives
// (DefaultMemory); 0: not limited.
func (nd *Node) MemoryLimit() uint64 {
	if nd.Needs.Memory > 0 {
		return nd.Needs.Memory
	}
	return nd.DefaultMemory
}

// clusterLimits gives every node of a cluster's network that has none a memory limit and a
// process limit.
func clusterLimits(n *Network) {
	for _, nd := range n.Nodes {
		if nd.Pids == 0 {
			nd.Pids = DefaultPids
		}
		if nd.Needs.Memory == 0 {
			nd.DefaultMemory = ClusterMemory
			if k, _ := nodeKinds.lookup(nd.Kind); k.DefaultMemory > 0 { // the kind gives its nodes this much
				nd.DefaultMemory = k.DefaultMemory
			}
		}
	}
}
