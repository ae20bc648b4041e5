package cluster

import "testing"

func TestProgressState(t *testing.T) {
	placed := &Placement{}
	for _, tc := range []struct {
		name string
		p    Progress
		want string
	}{
		{"not placed", Progress{}, "placing"},
		{"refused", Progress{Placement: &Placement{Refused: "no room"}}, "refused"},
		{"failed at this generation", Progress{Placement: placed, Statuses: []*Status{{Generation: 3, State: Failed}}}, "failed"},
		{"failed at an older generation", Progress{Placement: placed, Statuses: []*Status{{Generation: 2, State: Failed}}, Waiting: []string{"m1"}}, "converging"},
		{"waiting", Progress{Placement: placed, Waiting: []string{"m1"}}, "converging"},
		{"every machine done", Progress{Placement: placed}, "up"},
	} {
		if got := tc.p.State(3); got != tc.want {
			t.Errorf("%s: State(3) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
