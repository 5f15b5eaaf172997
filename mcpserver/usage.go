package mcpserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// A hybrid listing shows the tools the key's agent used most. What it
// counts is the audit trail, which every call already writes: the agent's
// newest call events (at most usageSample, of the last usageWindow), read
// in one query per agent and kept on each node for usageTTL. Every call
// counts, whatever its outcome (a refused call is a tool the agent
// reached for); an event of a tool the key is no longer shown counts for
// nothing, since only shown tools are candidates.

// AuditLister reads an organization's audit trail (a toolplane.AuditStore
// does).
type AuditLister interface {
	ListAudit(ctx context.Context, org string, filter toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error)
}

// The bounds of what a hybrid listing counts.
const (
	usageWindow = 7 * 24 * time.Hour
	usageSample = 1000
	usageTTL    = time.Minute
	// usageAgents bounds the agents whose counts a node keeps.
	usageAgents = 4096
)

// usageCache keeps each agent's call counts for usageTTL.
type usageCache struct {
	mu sync.Mutex
	m  map[string]usageEntry
}

type usageEntry struct {
	at     time.Time
	counts map[string]int
}

// usageKey is the cache's key of an organization's agent.
func usageKey(org, agent string) string { return org + "\x00" + agent }

// usageStale reports whether the counts of cred's agent are older than
// usageTTL (or not read yet).
func (s *Server) usageStale(cred *toolplane.Credential) bool {
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	e, ok := s.usage.m[usageKey(cred.OrganizationID, cred.Subject)]
	return !ok || time.Since(e.at) >= usageTTL
}

// callCounts answers how many times cred's agent called each tool (by
// platform name) lately; none when the server reads no audit trail. A
// trail that cannot be read answers what was last read, or none.
func (s *Server) callCounts(ctx context.Context, cred *toolplane.Credential) map[string]int {
	if s.Audit == nil {
		return nil
	}
	key := usageKey(cred.OrganizationID, cred.Subject)
	s.usage.mu.Lock()
	e, ok := s.usage.m[key]
	s.usage.mu.Unlock()
	if ok && time.Since(e.at) < usageTTL {
		return e.counts
	}
	now := time.Now()
	evs, _, err := s.Audit.ListAudit(ctx, cred.OrganizationID, toolplane.AuditFilter{AgentID: cred.Subject, Since: now.Add(-usageWindow),
		Kinds: []toolplane.AuditKind{toolplane.AuditCall}}, "", usageSample)
	if err != nil {
		s.Log.WarnContext(ctx, "the agent's calls could not be counted", "err", err)
		return e.counts
	}
	counts := make(map[string]int)
	for _, ev := range evs {
		counts[ev.Tool]++
	}
	s.usage.mu.Lock()
	if s.usage.m == nil {
		s.usage.m = map[string]usageEntry{}
	}
	if len(s.usage.m) >= usageAgents {
		for k, old := range s.usage.m {
			if time.Since(old.at) >= usageTTL {
				delete(s.usage.m, k)
			}
		}
	}
	if len(s.usage.m) < usageAgents {
		s.usage.m[key] = usageEntry{at: now, counts: counts}
	}
	s.usage.mu.Unlock()
	return counts
}

// mostUsed answers the top tools of shown by counts, most called first
// (ties by name), of those called at least once: a tool the agent never
// called is found through find_tools.
func mostUsed(shown []*registry.Tool, counts map[string]int, top int) []*registry.Tool {
	var used []*registry.Tool
	for _, t := range shown {
		if counts[t.Def.Name] > 0 && !isMeta(t.Model) {
			used = append(used, t)
		}
	}
	slices.SortFunc(used, func(a, b *registry.Tool) int {
		if d := counts[b.Def.Name] - counts[a.Def.Name]; d != 0 {
			return d
		}
		if a.Model < b.Model {
			return -1
		}
		if a.Model > b.Model {
			return 1
		}
		return 0
	})
	return used[:min(top, len(used))]
}
