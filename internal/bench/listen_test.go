package bench

import "testing"

func TestListensOn(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0016 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
`
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
`
	for _, c := range []struct {
		name  string
		table string
		port  int
		want  bool
	}{
		{"listening v4", tcp, 5201, true},
		{"established only", tcp, 22, false},
		{"absent", tcp, 80, false},
		{"listening v6", tcp6, 80, true},
		{"header only", "  sl  local_address\n", 5201, false},
		{"empty", "", 5201, false},
	} {
		if got := listensOn([]byte(c.table), c.port); got != c.want {
			t.Errorf("%s: listensOn(%d) = %v, want %v", c.name, c.port, got, c.want)
		}
	}
}
