package dataplane

import (
	"errors"
	"strings"
	"testing"
)

func TestChooseHook(t *testing.T) {
	for _, tc := range []struct {
		env     string
		haveTCX bool
		want    Hook
		wantErr string // in the error, which must match ErrHook
	}{
		{"", true, HookClsact, ""},
		{"", false, HookClsact, ""},
		{"auto", true, HookTCX, ""},
		{"auto", false, HookClsact, ""},
		{"clsact", true, HookClsact, ""},
		{"clsact", false, HookClsact, ""},
		{"tcx", true, HookTCX, ""},
		{"tcx", false, "", "has no tcx"},
		{"TCX", true, "", `"TCX" (--port-hook, TRELLIS_PORT_HOOK) is not tcx, clsact or auto`},
		{"netkit", true, "", `"netkit" (--port-hook, TRELLIS_PORT_HOOK) is not tcx, clsact or auto`},
	} {
		got, err := chooseHook(tc.env, tc.haveTCX)
		if tc.wantErr != "" {
			if !errors.Is(err, ErrHook) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), HookEnv) {
				t.Errorf("chooseHook(%q, %v) = %q, %v; want an ErrHook naming %s and saying %q", tc.env, tc.haveTCX, got, err, HookEnv, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("chooseHook(%q, %v) = %q, %v; want %q", tc.env, tc.haveTCX, got, err, tc.want)
		}
	}
}
