package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var nodeCases = []suiteCase{
	{"HeartbeatRoundTrip", testNodeHeartbeat},
	{"HeartbeatNeverMovesBack", testNodeHeartbeatMonotonic},
	{"RetireOtherInstances", testNodeRetire},
	{"HeartbeatNeverStores", testNodeHeartbeatNeverStores},
}

func getNode(t *testing.T, s toolplane.Store, id string) *toolplane.Node {
	t.Helper()
	n, err := s.GetNode(t.Context(), id)
	if err != nil {
		t.Fatalf("GetNode(%s) = %v", id, err)
	}
	return n
}

// testNodeHeartbeat: InsertNode stores an instance as given (times to the
// microsecond, in UTC), and only once; an unknown instance is not found.
func testNodeHeartbeat(t *testing.T, s toolplane.Store) {
	id := newOrg() // any unique text
	want := toolplane.Node{ID: id, Name: "node-a", StartedAt: at(0), HeartbeatAt: at(time.Second)}
	if err := s.InsertNode(t.Context(), &want); err != nil {
		t.Fatal(err)
	}
	again := toolplane.Node{ID: id, Name: "renamed", StartedAt: at(time.Hour), HeartbeatAt: at(time.Hour)}
	if err := s.InsertNode(t.Context(), &again); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("InsertNode(same ID) = %v; want ErrExists", err)
	}
	if d := diff(*getNode(t, s, id), want); d != "" {
		t.Fatalf("stored node differs: %s", d)
	}
	if _, err := s.GetNode(t.Context(), id+"-other"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetNode(unknown) = %v; want ErrNotFound", err)
	}
}

// testNodeHeartbeatMonotonic: a later heartbeat moves HeartbeatAt forward;
// an earlier one (delayed in flight) leaves it; neither changes the
// instance's name or start.
func testNodeHeartbeatMonotonic(t *testing.T, s toolplane.Store) {
	id := newOrg()
	beat := func(name string, started, hb time.Time) {
		t.Helper()
		if err := s.Heartbeat(t.Context(), &toolplane.Node{ID: id, Name: name, StartedAt: started, HeartbeatAt: hb}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InsertNode(t.Context(), &toolplane.Node{ID: id, Name: "node-a", StartedAt: at(0), HeartbeatAt: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	beat("renamed", at(time.Hour), at(5*time.Second))
	beat("node-a", at(0), at(3*time.Second))
	want := toolplane.Node{ID: id, Name: "node-a", StartedAt: at(0), HeartbeatAt: at(5 * time.Second)}
	if d := diff(*getNode(t, s, id), want); d != "" {
		t.Fatalf("node after heartbeats: %s", d)
	}
}

// testNodeRetire: retiring a name marks its other instances dead (at the
// Unix epoch), counts them once, and leaves the instance named and other
// names alone.
func testNodeRetire(t *testing.T, s toolplane.Store) {
	name := "node-" + newOrg()
	ids := []string{newOrg(), newOrg(), newOrg(), newOrg()}
	names := []string{name, name, name, name + "-other"}
	for i, id := range ids {
		if err := s.InsertNode(t.Context(), &toolplane.Node{ID: id, Name: names[i], StartedAt: at(0), HeartbeatAt: at(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.RetireNodes(t.Context(), name, ids[2])
	if err != nil || n != 2 {
		t.Fatalf("RetireNodes = %d, %v; want 2", n, err)
	}
	for i, id := range ids {
		got := getNode(t, s, id).HeartbeatAt
		want := at(time.Minute)
		if i < 2 {
			want = time.Unix(0, 0)
		}
		if !got.Equal(stored(want)) {
			t.Errorf("instance %d heartbeat = %v, want %v", i, got, want)
		}
	}
	if n, err := s.RetireNodes(t.Context(), name, ids[2]); err != nil || n != 0 {
		t.Fatalf("RetireNodes again = %d, %v; want 0", n, err)
	}
	// A retired instance's late heartbeat does not revive it: its process
	// is gone, and its claims are being decided.
	if err := s.Heartbeat(t.Context(), &toolplane.Node{ID: ids[0], Name: name, StartedAt: at(0), HeartbeatAt: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := getNode(t, s, ids[0]).HeartbeatAt; !got.Equal(time.Unix(0, 0)) {
		t.Errorf("a retired instance's heartbeat moved to %v", got)
	}
}

// testNodeHeartbeatNeverStores: a heartbeat of an instance not stored (one
// retention removed after it was retired or silent) changes nothing: only
// InsertNode stores an instance, so a process gone stays dead.
func testNodeHeartbeatNeverStores(t *testing.T, s toolplane.Store) {
	id := newOrg()
	if err := s.Heartbeat(t.Context(), &toolplane.Node{ID: id, Name: "node-a", StartedAt: at(0), HeartbeatAt: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.GetNode(t.Context(), id); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetNode after a heartbeat of an unknown instance = %v, %v; want ErrNotFound", n, err)
	}
}
