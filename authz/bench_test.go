package authz_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// BenchmarkAddGrant: a grant added through the service on an SQLite file,
// stored with its change record and its audit event. cpu-ns/op is the
// process's CPU time (user and system, every goroutine's) over the loop,
// per grant: on two shared cores it is steadier than the wall time.
func BenchmarkAddGrant(b *testing.B) {
	svc := authz.New(authz.Config{Store: sqlitetest.New(b)})
	by := &toolplane.Credential{ID: "tpk_bench", OrganizationID: "org-1", Kind: toolplane.CredentialPerson,
		Subject: "bench", Roles: []string{toolplane.RoleAgentOperator}}
	ctx := context.Background()
	b.ReportAllocs()
	start := cpu()
	n := 0
	for b.Loop() {
		g := &toolplane.Grant{AgentID: fmt.Sprintf("agent-%d", n), Pattern: "crm.*"}
		if err := svc.AddGrant(ctx, g, by); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(cpu()-start)/float64(n), "cpu-ns/op")
}

// cpu answers the process's CPU time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
