package result

// DelayResult is what the delay and jitter configured on a running link delivered, and how
// fast the way this machine delays frames carries them.
type DelayResult struct {
	Way     string        `json:"way"`            // "netem" or "delay line"
	Kernel  string        `json:"kernel"`         // the running kernel's release
	Frames  int           `json:"frames"`         // probe frames per row
	Load1   float64       `json:"load1_at_start"` // load average when the part began
	Rows    []*DelayRow   `json:"rows"`
	Ceiling *DelayCeiling `json:"ceiling,omitempty"`
	// Where says how a run merged into another machine's report was made (DelayGuests): the
	// guest, the command, the host's load.
	Where string `json:"where,omitempty"`
}

// DelayRow is one link configuration (rate, delay, jitter) and the one-way delays its probe
// frames met, in milliseconds.
type DelayRow struct {
	Rate   string  `json:"rate"`   // as the file writes it
	Config string  `json:"config"` // the delay keys, as the file writes them
	Delay  float64 `json:"delay_ms"`
	Jitter float64 `json:"jitter_ms,omitempty"`
	Median float64 `json:"median_ms"`
	P99    float64 `json:"p99_ms"`
	Mean   float64 `json:"mean_ms"`
	SD     float64 `json:"sd_ms"`
	Lost   int     `json:"lost"`
}

// DelayCeiling is the rate full frames sent as fast as one sender can went through an
// uncapped link, without and with a 1 ms delay.
type DelayCeiling struct {
	FrameSize int     `json:"frame_size"`
	Frames    int     `json:"frames"`
	PlainKpps float64 `json:"plain_kpps"`
	PlainMbps float64 `json:"plain_mbps"`
	PlainLost int     `json:"plain_lost"`
	DelayKpps float64 `json:"delay_kpps"`
	DelayMbps float64 `json:"delay_mbps"`
	DelayLost int     `json:"delay_lost"`
}
