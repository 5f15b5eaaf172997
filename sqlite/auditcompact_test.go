package sqlite

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// compactVersion is the migration that stores the audit trail's hex
// columns as bytes and drops the id from the time and run indexes.
const compactVersion = 49

// beforeVersion answers a store with the migrations before version
// applied, and no later one: what a binary of that time left.
func beforeVersion(t *testing.T, version int) *Store {
	t.Helper()
	s := New(openTest(t))
	if _, err := s.db.ExecContext(t.Context(), createMigrationsTable); err != nil {
		t.Fatal(err)
	}
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version < version {
			if err := s.apply(t.Context(), m); err != nil {
				t.Fatalf("apply %04d: %v", m.Version, err)
			}
		}
	}
	return s
}

// Events stored before migration 0049, in the form a binary of that time
// stored them (every hex column as text), read back after it byte for
// byte through every reader, and their chain, continued after the
// migration, verifies whole.
func TestMigrationAuditCompact(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := beforeVersion(t, compactVersion)
	const org = "org-compact"
	hex64 := strings.Repeat("0123456789abcdef", 4)
	now := time.UnixMicro(time.Now().UnixMicro())
	// Values that pack (lowercase digits of the column's length) and
	// values that stay text: uppercase, short, another prefix, empty.
	events := []*toolplane.AuditEvent{
		{ID: "aud_1", RunID: "run-1", AgentID: "agent-1", Tool: "crm.get_contact", ToolVersion: "1.0.0",
			Source: toolplane.SourceMCP, Outcome: "ok", ArgumentsHash: hex64, OutputHash: "sha256:" + hex64,
			TraceID: hex64[:32], SpanID: hex64[32:48], PolicyInput: []byte(`{"grants":"allow","request":{"principal":{"agent":"agent-1","roles":[],"attributes":{}}}}`),
			Arguments: []byte(`{"to":"contact-42"}`), LatencyMicros: 120, CostCents: 3, Attempts: 1,
			Key: "3:run,7:agent-1,5:run-1,5:agent,64:" + hex64},
		{ID: "aud_2", RunID: "run-1", AgentID: "agent-1", Tool: "crm.get_contact", ToolVersion: "1.0.0",
			Source: toolplane.SourceMCP, Outcome: "ok", ArgumentsHash: strings.ToUpper(hex64), OutputHash: "sha256:" + strings.ToUpper(hex64),
			TraceID: hex64[:31], SpanID: "span-one", LatencyMicros: 9, Key: "k-1"},
		{ID: "aud_3", RunID: "run-2", AgentID: "agent-2", Tool: "crm.update_contact", ToolVersion: "2.1.0",
			Source: toolplane.SourceREST, Outcome: "denied", ArgumentsHash: "sha256:" + hex64, OutputHash: "md5:" + hex64[:32],
			Reason: "no grant", Effect: toolplane.EffectWrite, Destructive: true, Key: "ключ:" + hex64},
		{ID: "aud_4", Kind: toolplane.AuditKind("approval.decided"), Subject: "apr_1", AgentID: "agent-1", Outcome: "approved",
			ApproverID: "opal", ApprovalID: "apr_1", Key: "64:" + strings.ToUpper(hex64)},
		// Created in the same microsecond as aud_5, so the ids order them.
		{ID: "aud_6", RunID: "run-2", AgentID: "agent-2", Tool: "crm.get_contact", Outcome: "ok", ArgumentsHash: hex64, OutputHash: "sha256:" + hex64},
		{ID: "aud_5", RunID: "run-2", AgentID: "agent-2", Tool: "crm.get_contact", Outcome: "ok", ArgumentsHash: hex64, OutputHash: "sha256:" + hex64},
		// A caller's key may hold a NUL byte, where SQL's length, substr
		// and GLOB stop: kept as text, whole.
		{ID: "aud_7", RunID: "run-3", AgentID: "agent-3", Tool: "crm.get_contact", Outcome: "ok", Key: hex64 + "\x00zz"},
		{ID: "aud_8", RunID: "run-3", AgentID: "agent-3", Tool: "crm.get_contact", Outcome: "ok", Key: "6:caller,3:p-1,70:" + hex64 + "\x00tail",
			TraceID: hex64[:32] + "\x00", SpanID: hex64[:16] + "\x00x"},
	}
	var prev []byte
	args := make([]any, chainArgCount)
	for i, e := range events {
		e.OrganizationID = org
		e.CreatedAt = now.Add(time.Duration(min(i, 4)) * time.Millisecond)
		auditchain.Normalize(e)
		auditchain.Seal(e, int64(i+1), prev)
		prev = e.Hash
		setAuditArgs(args, e)
		// As text, as the columns were.
		for col, v := range map[int]string{sqlstore.HexArgumentsHash: e.ArgumentsHash, sqlstore.HexOutputHash: e.OutputHash,
			sqlstore.HexTraceID: e.TraceID, sqlstore.HexSpanID: e.SpanID, sqlstore.HexKey: e.Key} {
			args[col] = v
		}
		if _, err := s.db.ExecContext(ctx, insertAudit, args[:auditArgCount]...); err != nil {
			t.Fatalf("store %s before the migration: %v", e.ID, err)
		}
	}
	if _, err := s.db.ExecContext(ctx, registerAuditOrganization, org); err != nil {
		t.Fatal(err)
	}

	// What every reader answers: the list (whole, by run, paged one by
	// one), each event by id, and the chain.
	type reads struct {
		list, byRun, paged, byID, chain []toolplane.AuditEvent
	}
	read := func() reads {
		t.Helper()
		var r reads
		var err error
		if r.list, _, err = s.ListAudit(ctx, org, toolplane.AuditFilter{}, "", 100); err != nil {
			t.Fatal(err)
		}
		if r.byRun, _, err = s.ListAudit(ctx, org, toolplane.AuditFilter{RunID: "run-2"}, "", 100); err != nil {
			t.Fatal(err)
		}
		for after := ""; ; {
			page, next, err := s.ListAudit(ctx, org, toolplane.AuditFilter{}, after, 1)
			if err != nil {
				t.Fatal(err)
			}
			r.paged = append(r.paged, page...)
			if next == "" {
				break
			}
			after = next
		}
		for _, e := range events {
			got, err := s.GetAudit(ctx, org, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			r.byID = append(r.byID, *got)
		}
		if r.chain, err = s.AuditChain(ctx, org, 1, 0, 100); err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := read()
	for i, e := range events {
		got := before.byID[i]
		if got.ArgumentsHash != e.ArgumentsHash || got.OutputHash != e.OutputHash || got.TraceID != e.TraceID ||
			got.SpanID != e.SpanID || got.Key != e.Key || string(got.Hash) != string(e.Hash) {
			t.Fatalf("before the migration, %s read back as %+v", e.ID, got)
		}
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	after := read()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the events read back otherwise after the migration:\nbefore %+v\nafter  %+v", before, after)
	}
	wantOrder := []string{"aud_8", "aud_7", "aud_6", "aud_5", "aud_4", "aud_3", "aud_2", "aud_1"}
	for name, list := range map[string][]toolplane.AuditEvent{"list": after.list, "paged": after.paged} {
		var ids []string
		for _, e := range list {
			ids = append(ids, e.ID)
		}
		if !reflect.DeepEqual(ids, wantOrder) {
			t.Errorf("%s after the migration: %v; want %v", name, ids, wantOrder)
		}
	}

	// The migration stored as bytes exactly what a new event's insert
	// does (sqlstore.PackHex), and left every other value as its text.
	for _, e := range events {
		for col, v := range map[int]string{sqlstore.HexArgumentsHash: e.ArgumentsHash, sqlstore.HexOutputHash: e.OutputHash,
			sqlstore.HexTraceID: e.TraceID, sqlstore.HexSpanID: e.SpanID, sqlstore.HexKey: e.Key} {
			name := strings.TrimSpace(strings.Split(sqlstore.AuditColumns, ",")[col])
			var typ string
			var stored []byte
			if err := s.db.QueryRowContext(ctx, `SELECT typeof(`+name+`), CAST(`+name+` AS BLOB) FROM audit_events
				WHERE organization_id = ? AND id = ?`, org, e.ID).Scan(&typ, &stored); err != nil {
				t.Fatal(err)
			}
			packed, ok := sqlstore.PackHex(nil, col, v)
			switch {
			case ok && (typ != "blob" || string(stored) != string(packed)):
				t.Errorf("%s %s = %q stored as %s %x; want its bytes %x", e.ID, name, v, typ, stored, packed)
			case !ok && (typ != "text" || string(stored) != v):
				t.Errorf("%s %s = %q stored as %s %q; want its text", e.ID, name, v, typ, stored)
			}
		}
	}

	// The chain goes on after the migration, and verifies whole; the
	// new events read back as they were stored.
	for i := range 3 {
		e := &toolplane.AuditEvent{OrganizationID: org, ID: "aud_new_" + string(rune('a'+i)), RunID: "run-3", AgentID: "agent-1",
			Tool: "crm.get_contact", Outcome: "ok", ArgumentsHash: hex64, OutputHash: "sha256:" + hex64, TraceID: hex64[:32],
			Key: "3:run,7:agent-1,5:run-3,5:agent,64:" + hex64, CreatedAt: now.Add(time.Second)}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	fresh, err := s.GetAudit(ctx, org, "aud_new_a")
	if err != nil || fresh.Key != "3:run,7:agent-1,5:run-3,5:agent,64:"+hex64 || fresh.OutputHash != "sha256:"+hex64 ||
		fresh.ArgumentsHash != hex64 || fresh.TraceID != hex64[:32] {
		t.Errorf("a new event read back as %+v, %v", fresh, err)
	}
	r, err := auditchain.VerifyStore(ctx, s, &auditchain.KeySet{}, org, 0, 0)
	if err != nil || !r.OK || r.Events != len(events)+3 {
		t.Fatalf("VerifyStore after the migration = %+v (break %+v), %v; want %d events verified", r, r.Break, err, len(events)+3)
	}
}

// The reads of the trail by organization and time stay within the index
// that holds every column they read (audit_events_traffic): the traffic
// overview's and the anomaly triage's tally, which SQLite reads
// organization by organization since no index of the trail by time alone
// is kept (migration 0049).
func TestTrailReadsByTimeAreIndexOnly(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	at := time.Now()
	q := toolplane.TrafficQuery{OrganizationID: "o", From: at, Until: at, Step: time.Minute}
	cells, cellArgs, _ := sqlstore.TrafficCells(dialect, q)
	series, seriesArgs, _ := sqlstore.TrafficSeries(dialect, q)
	tests := []struct {
		name, query string
		args        []any
		want        string
	}{
		{"TrafficCells", cells, cellArgs, "SEARCH audit_events USING COVERING INDEX audit_events_traffic"},
		{"TrafficSeries", series, seriesArgs, "SEARCH audit_events USING COVERING INDEX audit_events_traffic"},
		{"TallyAudit", sqlstore.TallyAuditByOrganization, []any{0, 1}, "SEARCH e USING COVERING INDEX audit_events_traffic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if joined := queryPlan(t, s, tt.query, tt.args...); !strings.Contains(joined, tt.want) {
				t.Errorf("plan %q: want %q", joined, tt.want)
			}
		})
	}
}
