package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// racedPass is one retention pass over a store beside another, as two
// periods' passes meet on a loaded host (one outlasting its period) or two
// nodes' do: its first read of the range to drop returns only once the
// other pass has read it too, so both set out to drop the same prefix;
// with wait set, its drop starts only once the other's drop returned.
type racedPass struct {
	AuditChainStore
	t       *testing.T
	read    *sync.WaitGroup
	readOne sync.Once
	wait    <-chan struct{}
	dropped chan struct{}
	dropOne sync.Once
}

func (p *racedPass) AuditExpired(ctx context.Context, org string, before time.Time) (int64, int64, error) {
	first, through, err := p.AuditChainStore.AuditExpired(ctx, org, before)
	p.readOne.Do(func() {
		p.read.Done()
		p.read.Wait()
	})
	return first, through, err
}

func (p *racedPass) DropAudit(ctx context.Context, from int64, cp *toolplane.AuditCheckpoint, ev *toolplane.AuditEvent) (int, error) {
	if p.wait != nil {
		select {
		case <-p.wait:
		case <-time.After(30 * time.Second):
			p.t.Error("the other pass never dropped")
		}
	}
	defer p.dropOne.Do(func() { close(p.dropped) })
	return p.AuditChainStore.DropAudit(ctx, from, cp, ev)
}

// testChainRetentionRaced: two retention passes at once over one
// organization's chain (two periods' passes, or two nodes') drop each
// event once and record each range's drop once, whichever drops first:
// the second finds what the first dropped gone and drops only what is
// left, without failing. What remains verifies, and another
// organization's trail is untouched.
func testChainRetentionRaced(t *testing.T, _ AuditChain, s AuditChainStore) {
	for _, c := range []struct {
		name string
		// The passes drop the events created before base+first and
		// base+second seconds (events n at base+n s); ordered: the
		// second drops once the first's drop returned, else both at once.
		first, second float64
		ordered       bool
		want          []string
	}{
		{"TwoPeriods", 3.5, 5.5, true, []string{"events 1-3", "events 4-5"}},
		{"OnePeriodTwice", 3.5, 3.5, false, []string{"events 1-3"}},
		{"OnePeriodTwiceOrdered", 3.5, 3.5, true, []string{"events 1-3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			org, other := newOrg(), newOrg()
			appendChain(t, s, org, 6)
			appendChain(t, s, other, 2)
			now := at(time.Hour)
			read := &sync.WaitGroup{}
			read.Add(2)
			a := &racedPass{AuditChainStore: s, t: t, read: read, dropped: make(chan struct{})}
			b := &racedPass{AuditChainStore: s, t: t, read: read, dropped: make(chan struct{})}
			if c.ordered {
				b.wait = a.dropped
			}
			record := func(d auditchain.Drop) *toolplane.AuditEvent { return auditchain.DropEvent(d, nil, nil, now) }
			var wg sync.WaitGroup
			drops := make([][]auditchain.Drop, 2)
			errs := make([]error, 2)
			for i, p := range []*racedPass{a, b} {
				before := at(time.Duration([]float64{c.first, c.second}[i] * float64(time.Second)))
				wg.Go(func() {
					drops[i], errs[i] = auditchain.Retain(t.Context(), p, testKeys(), org, before, now, record)
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("pass %d = %v; want no error (a range dropped beside it is no failure)", i+1, err)
				}
			}
			deleted := 0
			for _, ds := range drops {
				for _, d := range ds {
					deleted += d.Deleted
				}
			}
			var recorded []string
			rest := readChain(t, s, org)
			for _, e := range rest {
				if e.Kind == toolplane.AuditRetention {
					recorded = append(recorded, e.Subject)
				}
			}
			slices.Sort(recorded)
			if !slices.Equal(recorded, c.want) {
				t.Fatalf("drops recorded = %q; want %q, each range's drop once", recorded, c.want)
			}
			kept := 6 - (len(rest) - len(recorded))
			if deleted != kept {
				t.Fatalf("the passes answer %d rows deleted; %d were", deleted, kept)
			}
			wantValid(t, s, org, len(rest))
			wantChain(t, readChain(t, s, other), "ev-001", "ev-002")
		})
	}
}
