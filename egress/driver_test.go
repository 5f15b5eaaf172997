package egress_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// TestPostgresThroughThePolicy connects pgx through the policy, as a SQL
// runtime does: pgconn resolves a host before it dials, so the policy's
// LookupHost hands it the name unresolved and DialContext resolves and
// checks it.
func TestPostgresThroughThePolicy(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	res := newResolver(map[string][]string{"db.test": {"127.0.0.1"}})
	connect := func(rules toolplane.EgressRules) (int, error) {
		p, err := egress.Compile(rules, egress.WithResolver(res))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Host, cfg.Fallbacks = "db.test", nil
		cfg.DialFunc, cfg.LookupFunc = p.Dialer(), p.LookupHost
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		var one int
		err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
		return one, err
	}

	if one, err := connect(toolplane.EgressRules{Hosts: []string{"db.test"}, AllowCIDRs: []string{"127.0.0.1/32"}}); err != nil || one != 1 {
		t.Fatalf("allowed: %d, %v", one, err)
	}
	for _, tt := range []struct {
		name  string
		rules toolplane.EgressRules
		rule  string
	}{
		{"the address not allowed", toolplane.EgressRules{Hosts: []string{"db.test"}}, "loopback address 127.0.0.1"},
		{"the host not listed", toolplane.EgressRules{Hosts: []string{"other.test"}, AllowCIDRs: []string{"127.0.0.1/32"}}, "not on the connection's host list"},
	} {
		_, err := connect(tt.rules)
		var refused *egress.RefusedError
		if !errors.As(err, &refused) || !errors.Is(err, toolplane.ErrForbidden) || !strings.HasPrefix(refused.Rule, tt.rule) {
			t.Errorf("%s: %v; want refused: %s", tt.name, err, tt.rule)
		}
	}
}
