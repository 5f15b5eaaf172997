package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/internal/backend"
)

func TestFirstStartRefusesAPlantedCredentialsFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := backend.Open(ctx, filepath.Join(dir, "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "elsewhere")
	tests := []struct {
		name  string
		plant func(file string) error
	}{
		{"a file", func(file string) error { return os.WriteFile(file, []byte("x"), 0o644) }},
		{"a symbolic link", func(file string) error { return os.Symlink(target, file) }},
	}
	for i, tt := range tests {
		data := filepath.Join(dir, fmt.Sprint("data", i))
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := tt.plant(filepath.Join(data, "credentials.env")); err != nil {
			t.Fatal(err)
		}
		if err := firstStart(ctx, b, filepath.Join(dir, "t.db"), data, true, io.Discard, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("%s: first start wrote its keys through what was planted", tt.name)
		}
		if creds, _, _ := b.Store.ListCredentials(ctx, DefaultOrganization, "", 10); len(creds) != 0 {
			t.Errorf("%s: %d credentials stored that nobody holds", tt.name, len(creds))
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the link's target was written: %v", err)
	}
}

func TestFirstStartOnOneDatabaseByManyNodesMintsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	b, err := backend.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const nodes = 4
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = firstStart(ctx, b, db, filepath.Join(dir, fmt.Sprint("node", i)), true, io.Discard, slog.New(slog.DiscardHandler))
		}()
	}
	wg.Wait()
	files := 0
	for i := range nodes {
		if errs[i] != nil {
			t.Errorf("node %d: %v", i, errs[i])
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprint("node", i), "credentials.env")); err == nil {
			files++
		}
	}
	// The nodes that lost stored an admin key before they learned it, and
	// withdrew it: only the winner's keys are valid.
	all, _, _ := b.Store.ListCredentials(ctx, DefaultOrganization, "", 10)
	var valid []string
	for _, c := range all {
		if c.RevokedAt.IsZero() {
			valid = append(valid, c.ID)
		}
	}
	if files != 1 || len(valid) != 2 {
		t.Errorf("%d credentials files and %d valid credentials, want 1 file holding the 2 stored keys", files, len(valid))
	}
	// Every key stored, the withdrawn ones too, is in the trail with its
	// creation, and every withdrawal with its revocation, on a chain that
	// verifies.
	evs, _, err := b.Store.ListAudit(ctx, DefaultOrganization, toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditKey}}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, e := range evs {
		got = append(got, e.Outcome+" "+e.Subject)
	}
	for _, c := range all {
		want = append(want, "created "+c.ID)
		if !c.RevokedAt.IsZero() {
			want = append(want, "revoked "+c.ID)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("key trail = %q; want %q", got, want)
	}
	r, err := auditchain.VerifyStore(ctx, b.Store.(toolplane.AuditChainStore), &auditchain.KeySet{}, DefaultOrganization, 0, 0)
	if err != nil || !r.OK || r.Events != len(want)+1 { // and the demo agent's grant
		t.Errorf("verify = %+v, %v; want OK over %d events", r, err, len(want)+1)
	}
	if files == 1 {
		for i := range nodes {
			raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprint("node", i), "credentials.env"))
			if err != nil {
				continue
			}
			for _, id := range valid {
				if !strings.Contains(string(raw), id+"_") {
					t.Errorf("the credentials file lacks the valid key %s", id)
				}
			}
		}
	}
}

// The first start's keys have random ids like any other key: an id nobody
// can guess is an id nobody can present to probe or flood.
func TestFirstStartIDsAreNotPredictable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 2 {
		dir := t.TempDir()
		db := filepath.Join(dir, "t.db")
		b, err := backend.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := firstStart(ctx, b, db, filepath.Join(dir, "data"), true, io.Discard, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		creds, _, _ := b.Store.ListCredentials(ctx, DefaultOrganization, "", 10)
		if len(creds) != 2 {
			t.Fatalf("database %d: %d credentials", i, len(creds))
		}
		for _, c := range creds {
			if seen[c.ID] || strings.Count(c.ID, "0") > 12 {
				t.Errorf("database %d: the %s key has the id %s, which a reader of the source can guess", i, c.Subject, c.ID)
			}
			seen[c.ID] = true
		}
	}
}
