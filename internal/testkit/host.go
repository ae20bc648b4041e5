package testkit

import (
	"testing"
	"time"
)

// settle is how long LeaveHostAsFound waits for the kernel to free what a test closed
// (namespaces and links go with the last reference, a little after it); outside CI, where a
// difference may be someone else's, it waits less.
func settle() time.Duration {
	if InCI() {
		return 10 * time.Second
	}
	return time.Second
}

// LeaveHostAsFound snapshots the host now and, when the test ends (after the cleanups
// registered later), checks the host against it (CheckClean): a difference that is not
// excused fails the test. Without Owners (SetOwners) nothing is attributed: in CI, where one
// test runs at a time, every difference fails; on a developer machine, which others may be
// using, it is logged.
func LeaveHostAsFound(t testing.TB) {
	t.Helper()
	before, err := Snapshot()
	if err != nil {
		t.Fatalf("host snapshot: %v", err)
	}
	t.Cleanup(func() { CheckClean(t, before, settle()) })
}
