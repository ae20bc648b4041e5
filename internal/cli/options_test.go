package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/oci"
	"github.com/trellisnet/trellis/internal/substrate"
)

// TestMachineOptions: the machine's choices come from the environment as the flags' defaults,
// a flag given wins over its variable, and a bad EGRE route is refused naming the flag.
func TestMachineOptions(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    substrate.Options
		wantErr string
	}{
		{"none", nil, nil, substrate.Options{}, ""},
		{"environment", map[string]string{dataplane.HookEnv: "tcx", substrate.PortNSEnv: "network", substrate.DelayEnv: "line", dataplane.EncapRouteEnv: "per-frame"}, nil,
			substrate.Options{PortNS: "network", Delay: "line", Dataplane: dataplane.Config{PortHook: "tcx", PerFrameRoute: true}}, ""},
		{"flags", nil, []string{"--port-hook", "auto", "--port-netns", "root", "--delay", "netem", "--egre-route", "template"},
			substrate.Options{PortNS: "root", Delay: "netem", Dataplane: dataplane.Config{PortHook: "auto"}}, ""},
		{"flag over environment", map[string]string{dataplane.HookEnv: "tcx", dataplane.EncapRouteEnv: "per-frame"}, []string{"--port-hook", "clsact", "--egre-route", "template"},
			substrate.Options{Dataplane: dataplane.Config{PortHook: "clsact"}}, ""},
		{"bad route", map[string]string{dataplane.EncapRouteEnv: "per-packet"}, nil, substrate.Options{}, "--egre-route"},
		{"images", map[string]string{image.CacheEnv: "/tmp/cache", oci.MirrorsEnv: " mirror.example:5000, ,m2.example"}, nil,
			substrate.Options{ImageCache: "/tmp/cache", Mirrors: []string{"mirror.example:5000", "m2.example"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range []string{dataplane.HookEnv, substrate.PortNSEnv, substrate.DelayEnv, dataplane.EncapRouteEnv, image.CacheEnv, oci.MirrorsEnv} {
				t.Setenv(v, c.env[v])
			}
			root := &cobra.Command{Use: "trellis"}
			mo := addMachineFlags(root) // reads the environment, as NewRoot does
			if err := root.PersistentFlags().Parse(c.args); err != nil {
				t.Fatal(err)
			}
			got, err := mo.substrate()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), dataplane.EncapRouteEnv) {
					t.Errorf("%v; want an error naming %s and %s", err, c.wantErr, dataplane.EncapRouteEnv)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("%+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}
