package result

// VMResult holds the vm part's figures: VM nodes' boot time, and the forwarding rate and CPU of
// a VM node under each of the KVM paper's knobs.
type VMResult struct {
	Accel       string       `json:"accel"`      // kvm, or tcg (software emulation)
	Functional  bool         `json:"functional"` // the figures show that it works, not how fast (tcg)
	BootSeconds Stat         `json:"boot_seconds"`
	Knobs       []*VMKnobRow `json:"knobs"`
}

// VMKnobRow is one setting of the knobs: the node's `vm:` mapping.
type VMKnobRow struct {
	Knob      string `json:"knob"`
	Settings  string `json:"settings"` // the YAML of the node's vm: mapping, "" for none
	Peak      Stat   `json:"peak_pps"`
	PeakRatio *Stat  `json:"peak_ratio_to_defaults,omitempty"`
	// CPU is the cores each kind of QEMU thread used while the generator offered all it could:
	// "vcpu" (the vCPU threads) and "io" (main loop, I/O and vhost threads).
	CPU map[string]float64 `json:"cpu_cores"`
}
