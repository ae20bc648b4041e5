package measure

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestPerfControl plays perf's side of the control FIFOs (as perf opens them: the control FIFO
// read-write, the acknowledgement FIFO write-only) and checks what enable makes of its answers.
func TestPerfControl(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer string // "": perf never opens the FIFOs
		ok     bool
	}{
		{"ack with NUL", "ack\n\x00", true},
		{"ack", "ack\n", true},
		{"other answer", "nak\n", false},
		{"no perf", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newPerfControl(t.TempDir(), "t")
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			got := make(chan string, 1)
			if tc.answer != "" {
				go func() {
					ctl, err := os.OpenFile(c.ctlPath, os.O_RDWR, 0)
					if err != nil {
						got <- err.Error()
						return
					}
					defer ctl.Close()
					ack, err := os.OpenFile(c.ackPath, os.O_WRONLY, 0)
					if err != nil {
						got <- err.Error()
						return
					}
					defer ack.Close()
					buf := make([]byte, 16)
					n, _ := ctl.Read(buf)
					got <- string(buf[:n])
					ack.WriteString(tc.answer)
				}()
			}
			err = c.enable(context.Background(), 500*time.Millisecond)
			if (err == nil) != tc.ok {
				t.Fatalf("enable: %v, want ok %v", err, tc.ok)
			}
			if tc.answer != "" {
				if cmd := <-got; cmd != "enable\n" {
					t.Fatalf("perf got %q, want \"enable\\n\"", cmd)
				}
			}
		})
	}
}
