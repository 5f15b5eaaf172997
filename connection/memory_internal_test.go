package connection

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// countingStore answers listings of one connection, counting the reads,
// and may run a change in the middle of a read.
type countingStore struct {
	Store
	reads  int
	during func()
}

func (s *countingStore) ListConnections(ctx context.Context, org string, f toolplane.ConnectionFilter, after string, limit int) ([]toolplane.Connection, string, error) {
	s.reads++
	if s.during != nil {
		s.during()
	}
	return []toolplane.Connection{{ID: "con_1", OrganizationID: org, Provider: f.Provider, State: f.State, Name: fmt.Sprint(s.reads)}}, "", nil
}

func (s *countingStore) GetConnection(ctx context.Context, org, id string) (*toolplane.Connection, error) {
	s.reads++
	if s.during != nil {
		s.during()
	}
	return &toolplane.Connection{ID: id, OrganizationID: org, Name: fmt.Sprint(s.reads)}, nil
}

// TestMemory: reads are kept only while the feed says they are current,
// a change forgets its organization's, a read that a change overtook is
// not kept, and what is kept is bounded.
func TestMemory(t *testing.T) {
	t.Parallel()
	q := listQuery{provider: "crm", state: toolplane.ConnectionActive}
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		setup func(m *memory, s *countingStore) // before the second read
		reads int                               // store reads after three
	}{
		{"current", func(*memory, *countingStore) {}, 1},
		{"never current", func(m *memory, _ *countingStore) { m.ConnectionsLost() }, 3},
		{"current lapsed", func(m *memory, _ *countingStore) { m.ConnectionsCurrent(time.Now().Add(-time.Millisecond)) }, 3},
		{"changed", func(m *memory, _ *countingStore) { m.ConnectionChanged("org_a", "con_1") }, 2},
		{"another organization changed", func(m *memory, _ *countingStore) { m.ConnectionChanged("org_b", "con_2") }, 1},
		{"changed during the read", func(m *memory, s *countingStore) {
			m.ConnectionChanged("org_a", "con_1")
			s.during = func() { m.ConnectionChanged("org_a", "con_1"); s.during = nil }
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, read := range []func(m *memory, s *countingStore) (string, error){
				func(m *memory, s *countingStore) (string, error) {
					cs, _, err := m.list(ctx, s, "org_a", q, 10)
					if err != nil || len(cs) != 1 {
						return "", fmt.Errorf("list = %v, %v", cs, err)
					}
					return cs[0].Name, nil
				},
				func(m *memory, s *countingStore) (string, error) {
					c, err := m.get(ctx, s, "org_a", "con_1")
					if err != nil {
						return "", err
					}
					return c.Name, nil
				},
			} {
				m, s := newMemory(), &countingStore{}
				m.ConnectionsCurrent(time.Now().Add(time.Hour))
				for i := range 3 {
					if i == 1 {
						tc.setup(m, s)
					}
					if _, err := read(m, s); err != nil {
						t.Fatal(err)
					}
				}
				if s.reads != tc.reads {
					t.Errorf("%d store reads, want %d", s.reads, tc.reads)
				}
			}
			// What the store answered a call is the call's: changing it
			// changes nothing kept.
			m, s := newMemory(), &countingStore{}
			m.ConnectionsCurrent(time.Now().Add(time.Hour))
			cs, _, _ := m.list(ctx, s, "org_a", q, 10)
			c, _ := m.get(ctx, s, "org_a", "con_1")
			cs[0].Name, c.Name = "changed by the caller", "changed by the caller"
			cs, _, _ = m.list(ctx, s, "org_a", q, 10)
			c, _ = m.get(ctx, s, "org_a", "con_1")
			if cs[0].Name != "1" || c.Name != "2" || s.reads != 2 {
				t.Errorf("kept reads were changed by a caller: %q, %q", cs[0].Name, c.Name)
			}
			if cap(cs) != len(cs) {
				t.Error("a kept listing has room to append in place")
			}
		})
	}
}

// TestMemoryBounds: no more organizations, reads or versions are kept
// than the bounds, and a change drops its connection's opened secrets.
func TestMemoryBounds(t *testing.T) {
	t.Parallel()
	m, s := newMemory(), &countingStore{}
	m.ConnectionsCurrent(time.Now().Add(time.Hour))
	for i := range maxKeptOrgs + 10 {
		if _, _, err := m.list(t.Context(), s, fmt.Sprintf("org_%d", i), listQuery{provider: "crm"}, 10); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxKeptReads + 10 {
		if _, _, err := m.list(t.Context(), s, "org_a", listQuery{provider: fmt.Sprintf("p%d", i)}, 10); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxKeptVersions + 10 {
		sec := toolplane.Secrets{Token: "sk-kept"}
		m.keepVersion(&toolplane.Connection{ID: fmt.Sprintf("con_%d", i), Version: 1}, func(d *derived) { d.opened = &sec })
	}
	if len(m.orgs) > maxKeptOrgs || len(m.orgs["org_a"].lists) > maxKeptReads || len(m.versions) > maxKeptVersions {
		t.Errorf("kept %d organizations, %d reads of one, %d versions", len(m.orgs), len(m.orgs["org_a"].lists), len(m.versions))
	}
	c := &toolplane.Connection{ID: "con_7", OrganizationID: "org_a", Version: 1}
	sec := toolplane.Secrets{Token: "sk-kept"}
	m.keepVersion(c, func(d *derived) { d.opened = &sec })
	if d, ok := m.version(c); !ok || d.opened == nil {
		t.Fatal("an opened secret was not kept")
	}
	m.ConnectionChanged("org_a", "con_7")
	if _, ok := m.version(c); ok {
		t.Error("a changed connection's opened secret stays in memory")
	}
}

// What is kept of a connection version (its opened secrets, its compiled
// egress rules) is one organization's: another organization's connection
// of the same ID and version is never answered it.
func TestMemoryVersionsAreOneOrganizations(t *testing.T) {
	t.Parallel()
	m := newMemory()
	a := &toolplane.Connection{ID: "con_1", OrganizationID: "org_a", Version: 1}
	b := &toolplane.Connection{ID: "con_1", OrganizationID: "org_b", Version: 1}
	m.keepVersion(a, func(d *derived) { d.opened = &toolplane.Secrets{AccessToken: "org-a-token"} })
	if d, ok := m.version(b); ok {
		t.Fatalf("org_b's connection was answered what org_a's keeps: %+v", d.opened)
	}
	if d, ok := m.version(a); !ok || d.opened == nil || d.opened.AccessToken != "org-a-token" {
		t.Fatalf("org_a's own version = %+v, %v", d, ok)
	}
	m.ConnectionChanged("org_b", "con_1")
	if _, ok := m.version(a); !ok {
		t.Fatal("a change to org_b's connection forgot org_a's")
	}
	m.ConnectionChanged("org_a", "con_1")
	if _, ok := m.version(a); ok {
		t.Fatal("a change to org_a's connection left what was kept of it")
	}
}
