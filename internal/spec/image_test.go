package spec

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestImage(t *testing.T) {
	dir := t.TempDir()
	makeRoot(t, filepath.Join(dir, "root"), true)
	topo := filepath.Join(dir, "topo.yaml")
	head := "name: t\nnodes:\n  r1:\n"
	cases := []struct {
		name, body string
		want       string // the node's Image; "" with err
		err        string
	}{
		{"a registry reference", "    image: 127.0.0.1:5000/lab/pc:1\n", "127.0.0.1:5000/lab/pc:1", ""},
		{"a Docker Hub name", "    image: frrouting/frr:v8.4.0\n", "frrouting/frr:v8.4.0", ""},
		{"not a reference", "    image: 'Bad Name!'\n", "",
			topo + `:4: nodes.r1.image: "Bad Name!" is not an image reference`},
		{"with rootfs", "    rootfs: root\n    image: alpine:3\n", "",
			topo + ":5: nodes.r1.image: both image: and rootfs: give the node's root file system; keep one"},
		{"on a vm", "    kind: vm\n    image: alpine:3\n", "",
			topo + ":5: nodes.r1.image: a vm node boots its own disk, not a container image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := Parse(topo, []byte(head+c.body))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v\nwant %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Nodes[0].Image; got != c.want {
				t.Errorf("image %q, want %q", got, c.want)
			}
		})
	}
	_, err := ParseCluster(topo, []byte(head+"    image: alpine:3\n"), nil)
	if err == nil || !strings.Contains(err.Error(), ":4: nodes.r1.image: container images are not yet pulled by a cluster's agents") {
		t.Errorf("in a cluster: %v", err)
	}
	_, err = ParseSent(topo, []byte(head+"    image: alpine:3\n"), false)
	if err == nil || !strings.Contains(err.Error(), ":4: nodes.r1.image: a file sent to the API may not name an image") {
		t.Errorf("sent to the API: %v", err)
	}
}

func TestImageOverrideParse(t *testing.T) {
	const topo = "topo.yaml"
	head := "name: t\nnodes:\n  r1:\n"
	yes := true
	cases := []struct {
		name, body string
		want       *ImageOverride
		err        string
	}{
		{"none", "    image: a:1\n", nil, ""},
		{"words split as a shell would", "    image: a:1\n    entrypoint: /bin/sh -c 'echo \"a b\"'\n    cmd: [x, 'y z']\n",
			&ImageOverride{Entrypoint: []string{"/bin/sh", "-c", `echo "a b"`}, Cmd: []string{"x", "y z"}}, ""},
		{"env and keep-entrypoint", "    image: a:1\n    env: {TZ: UTC, N: 1, E: ''}\n    keep-entrypoint: true\n    exec: [true]\n",
			&ImageOverride{Env: []string{"TZ=UTC", "N=1", "E="}, KeepEntrypoint: &yes}, ""},
		{"env on a node without an image", "    env: {A: b}\n", &ImageOverride{Env: []string{"A=b"}}, ""},
		{"empty entrypoint", "    image: a:1\n    entrypoint: ''\n", nil, topo + ":5: nodes.r1.entrypoint: empty; give the program"},
		{"unclosed quote", "    image: a:1\n    cmd: echo 'a\n", nil, topo + `:5: nodes.r1.cmd: "echo 'a" cannot be split into words`},
		{"bad variable", "    image: a:1\n    env: {1A: b}\n", nil, topo + `:5: nodes.r1.env.1A: "1A" is not an environment variable's name`},
		{"variable twice", "    image: a:1\n    env: {A: b, A: c}\n", nil, topo + ":5: nodes.r1.env.A: variable given twice"},
		{"a list as value", "    image: a:1\n    env: {A: [b]}\n", nil, topo + ":5: nodes.r1.env.A: expected a single value"},
		{"keep-entrypoint not a boolean", "    image: a:1\n    keep-entrypoint: maybe\n", nil,
			topo + `:5: nodes.r1.keep-entrypoint: "maybe" is not true or false`},
		{"cmd without image", "    cmd: x\n", nil, topo + ":4: nodes.r1.cmd: only a node of a container image has an entrypoint to change"},
		{"entrypoint without image", "    exec: [true]\n    entrypoint: x\n", nil,
			topo + ":5: nodes.r1.entrypoint: only a node of a container image has an entrypoint to change"},
		{"keep-entrypoint without image", "    keep-entrypoint: false\n", nil,
			topo + ":4: nodes.r1.keep-entrypoint: only a node of a container image has an entrypoint to change"},
		{"env on a vm", "    kind: vm\n    env: {A: b}\n", nil, topo + ":5: nodes.r1.env: a vm node takes no env:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := Parse(topo, []byte(head+c.body))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v\nwant %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Nodes[0].ImageSet; !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestImageOverrideApply(t *testing.T) {
	no := false
	yes := true
	ep, cmd := []string{"/init"}, []string{"serve", "-v"}
	env := []string{"PATH=/bin", "A=1"}
	cases := []struct {
		name     string
		o        *ImageOverride
		exec     bool
		argv     []string
		env      []string
		wantMain bool
	}{
		{"the image's, no exec: main", nil, false, []string{"/init", "serve", "-v"}, env, true},
		{"the image's, exec: not main", nil, true, []string{"/init", "serve", "-v"}, env, false},
		{"entrypoint drops the image's cmd", &ImageOverride{Entrypoint: []string{"/x"}}, false, []string{"/x"}, env, true},
		{"entrypoint and cmd", &ImageOverride{Entrypoint: []string{"/x"}, Cmd: []string{"y"}}, false, []string{"/x", "y"}, env, true},
		{"cmd keeps the entrypoint", &ImageOverride{Cmd: []string{"y"}}, false, []string{"/init", "y"}, env, true},
		{"env adds and replaces", &ImageOverride{Env: []string{"A=2", "B=3"}}, false, []string{"/init", "serve", "-v"},
			[]string{"PATH=/bin", "A=2", "B=3"}, true},
		{"keep-entrypoint with exec", &ImageOverride{KeepEntrypoint: &yes}, true, []string{"/init", "serve", "-v"}, env, true},
		{"keep-entrypoint false", &ImageOverride{KeepEntrypoint: &no}, false, []string{"/init", "serve", "-v"}, env, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := c.o.Apply(&ImageRun{Env: slices.Clone(env)}, ep, cmd, c.exec)
			if !slices.Equal(run.Argv, c.argv) || !slices.Equal(run.Env, c.env) || run.Main != c.wantMain {
				t.Errorf("got argv %q env %q main %v, want %q %q %v", run.Argv, run.Env, run.Main, c.argv, c.env, c.wantMain)
			}
		})
	}
	if !slices.Equal(env, []string{"PATH=/bin", "A=1"}) || !slices.Equal(ep, []string{"/init"}) {
		t.Errorf("Apply changed the image's config: %q %q", env, ep)
	}
}
