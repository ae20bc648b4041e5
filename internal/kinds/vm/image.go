package vm

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"

	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/spec"
)

// frrWords in a node's exec or files say it runs FRR: its guest image then holds FRR, which
// costs about 20 MB of image, and of the guest's memory, that other nodes do not pay.
var frrWords = []string{"frr", "vtysh"}

// wantsFRR says whether node nd runs FRR: a command, a file's path or its owner names FRR or
// vtysh (/usr/lib/frr/frrinit.sh, /etc/frr/frr.conf, frr:frr, ...).
func wantsFRR(nd *spec.Node) bool {
	texts := append([]string{}, nd.Exec...)
	for _, f := range nd.Files {
		texts = append(texts, f.Path, f.Owner)
	}
	for _, t := range texts {
		for _, w := range frrWords {
			if strings.Contains(strings.ToLower(t), w) {
				return true
			}
		}
	}
	return false
}

var prepared struct {
	sync.Mutex
	imgs    map[bool]*image.Image // by whether it holds FRR
	noticed bool
}

// Prepare checks that QEMU is installed, says once per process when VMs will run under
// software emulation, and builds the guest images the plan's VM nodes boot (or finds them in
// the cache): none for nodes that boot their own initrd or disk, one with FRR for nodes that run it
// and one without for the others. Without a plan it builds the image without FRR.
func (Kind) Prepare(ctx context.Context, env *kinds.Env) error {
	if _, err := exec.LookPath(QEMU); err != nil {
		return fmt.Errorf("VM nodes need QEMU (%v): install qemu-system-x86", err)
	}
	need := map[bool]bool{}
	if env.Plan == nil {
		need[false] = true
	} else {
		for _, n := range env.Plan.Nodes {
			if n.Kind == Name && knobs(n.Node).Agent() {
				need[wantsFRR(n.Node)] = true
			}
		}
	}
	for _, frr := range []bool{false, true} {
		if need[frr] {
			if _, err := guestImage(ctx, env, frr); err != nil {
				return err
			}
		}
	}
	prepared.Lock()
	defer prepared.Unlock()
	if !prepared.noticed && Accel() == "tcg" {
		logline.OrDiscard(env.Log).Info("notice: KVM does not work on this machine; VM nodes run under software emulation (TCG), slowly")
	}
	prepared.noticed = true
	return nil
}

// guestImage returns the default guest image, with FRR or without, built once per process.
func guestImage(ctx context.Context, env *kinds.Env, frr bool) (image.Image, error) {
	prepared.Lock()
	defer prepared.Unlock()
	if img := prepared.imgs[frr]; img != nil {
		return *img, nil
	}
	if _, err := exec.LookPath(QEMU); err != nil {
		return image.Image{}, fmt.Errorf("VM nodes need QEMU (%v): install qemu-system-x86", err)
	}
	s := image.DefaultSpec()
	s.FRR = frr
	img, err := image.Build(ctx, image.CacheOr(env.ImageCache), s, env.Log)
	if err != nil {
		return img, fmt.Errorf("no guest image: %w", err)
	}
	if prepared.imgs == nil {
		prepared.imgs = map[bool]*image.Image{}
	}
	prepared.imgs[frr] = &img
	return img, nil
}
