package result

// ClusterResult is the cluster part's: networks of Nodes nodes each placed over Machines
// simulated machines by a placer, each machine converging its share through its agent.
type ClusterResult struct {
	Machines     int              `json:"machines"`
	Nodes        int              `json:"nodes_per_network"`
	LeaseSeconds float64          `json:"lease_seconds"` // the agents' lease
	Parallel     int              `json:"parallel"`      // ups at once
	Quick        bool             `json:"quick,omitempty"`
	Load1        float64          `json:"load1_at_start"` // load average when the part began
	Up           []ClusterUp      `json:"up"`
	Failover     *ClusterFailover `json:"failover,omitempty"`
}

// ClusterUp is the time from `trellis --cluster up` of Networks networks (a few at once) to
// every agent reporting them converged, and etcd's writes (revisions) over it.
type ClusterUp struct {
	Networks         int     `json:"networks"`
	Seconds          float64 `json:"seconds"`
	Writes           int64   `json:"etcd_writes"`
	WritesPerNetwork float64 `json:"etcd_writes_per_network"`
}

// ClusterFailover is the time from a machine lost (its agent killed, its cable pulled) until
// every network is placed on the other machines and converged there.
type ClusterFailover struct {
	Machine  string  `json:"machine"`
	Nodes    int     `json:"nodes"`    // nodes the machine held
	Networks int     `json:"networks"` // networks it held nodes of
	Seconds  float64 `json:"seconds"`
	// PlacedSeconds is until every network's placement left the machine (its lease expired
	// and the placer placed its nodes again), before they converged (Seconds); 0 in results
	// from before it was measured.
	PlacedSeconds float64 `json:"placed_seconds,omitempty"`
}
