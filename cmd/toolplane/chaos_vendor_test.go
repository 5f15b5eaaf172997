package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/providerjob"
)

// The vendor the chaos nodes' compiled-in submit tool calls
// (internal/chaosnode): its name, the submit tool, how it signs, and what
// a credit costs.
const (
	vendorName     = "chaosvendor"
	vendorTool     = "vendor.submit"
	vendorEnv      = "TOOLPLANE_CHAOS_VENDOR_URL"
	vendorSecret   = "chaos-vendor-signing-secret"
	vendorSecretEv = "TOOLPLANE_PROVIDER_SECRET_CHAOSVENDOR"
	centsPerCredit = 10
)

// vendorJob is one job a vendor took: what it was sent, and what it
// called back.
type vendorJob struct {
	id, ref, vendorID, path string
	// state is the terminal status it reports (FINISHED or FAILED), and
	// credits what the job cost.
	state   string
	credits int64
	// acked: a delivery of the terminal report was answered 200.
	acked bool
	// deliveries of the terminal report (duplicates are those past the
	// first), progress reports, retries after a dropped connection or a
	// 5xx, and refusals (any other answer: a broken rule).
	deliveries, duplicates, progress, retries int
	refused                                   []string
}

// chaosVendor stands for a batch-enrichment vendor in the test process
// (never killed): it takes one cluster's submissions, counting them per
// action (a second one for an action is a doubled effect), answers each
// with its own id after a pause (so a kill lands between its effect and
// the answer), and calls the job back, signed as a body-signed vendor
// signs: sometimes a progress report first, then the terminal report
// (finished, or now and then failed), to a random node of the cluster,
// sometimes twice, to two nodes, at once or a moment apart, retrying a
// delivery until it is acknowledged, while the nodes are being killed.
type chaosVendor struct {
	URL   string
	nodes []string // the cluster's node addresses
	until time.Time

	mu    sync.Mutex
	posts map[string][]effect // by action (the job's one ref)
	jobs  map[string]*vendorJob
	wg    sync.WaitGroup
}

func newChaosVendor(t *testing.T, nodes []string) *chaosVendor {
	t.Helper()
	v := &chaosVendor{nodes: nodes, posts: map[string][]effect{}, jobs: map[string]*vendorJob{}}
	srv := httptest.NewServer(http.HandlerFunc(v.submit))
	t.Cleanup(srv.Close)
	v.URL = srv.URL
	return v
}

// submit takes one batch.
func (v *chaosVendor) submit(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name       string   `json:"name"`
		WebhookURL string   `json:"webhook_url"`
		Refs       []string `json:"refs"`
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil || json.Unmarshal(raw, &in) != nil || len(in.Refs) != 1 || !strings.HasPrefix(in.Name, "toolplane:") {
		http.Error(w, "bad batch", http.StatusBadRequest)
		return
	}
	hook, err := url.Parse(in.WebhookURL)
	if err != nil {
		http.Error(w, "bad webhook_url", http.StatusBadRequest)
		return
	}
	id := strings.TrimPrefix(in.Name, "toolplane:")
	time.Sleep(time.Duration(20+rand.IntN(100)) * time.Millisecond)
	j := &vendorJob{id: id, ref: in.Refs[0], vendorID: "vb_" + id, path: hook.Path, state: "FINISHED", credits: 1 + rand.Int64N(5)}
	if rand.Float64() < 0.1 {
		j.state = "FAILED"
	}
	v.mu.Lock()
	v.posts[j.ref] = append(v.posts[j.ref], effect{At: time.Now()})
	first := v.jobs[id] == nil
	if first {
		v.jobs[id] = j
	} else {
		j = v.jobs[id]
	}
	v.mu.Unlock()
	if first {
		v.wg.Add(1)
		go v.callBack(j)
	}
	time.Sleep(time.Duration(20+rand.IntN(100)) * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q}`, j.vendorID)
}

// callBack delivers the job's reports.
func (v *chaosVendor) callBack(j *vendorJob) {
	defer v.wg.Done()
	time.Sleep(200*time.Millisecond + rand.N(1800*time.Millisecond))
	body := func(status string, data any) []byte {
		b, _ := json.Marshal(map[string]any{"id": j.vendorID, "name": providerjob.BatchName(j.id), "status": status,
			"cost": map[string]any{"credits": j.credits}, "data": data})
		return b
	}
	if rand.Float64() < 0.2 {
		v.deliver(j, body("IN_PROGRESS", []any{}), true)
	}
	final := body(j.state, []any{map[string]any{"ref": j.ref, "email": j.ref + "@example.com"}})
	if rand.Float64() < 0.3 {
		// The vendor sends it twice (its own retry of an answer it lost),
		// to two nodes, racing or a moment apart.
		var twice sync.WaitGroup
		twice.Add(1)
		go func() {
			defer twice.Done()
			if rand.IntN(2) == 0 {
				time.Sleep(rand.N(500 * time.Millisecond))
			}
			v.deliver(j, final, false)
		}()
		v.deliver(j, final, false)
		twice.Wait()
		return
	}
	v.deliver(j, final, false)
}

// deliver posts body, signed, to a random node until one acknowledges it
// or the vendor's time runs out.
func (v *chaosVendor) deliver(j *vendorJob, body []byte, progress bool) {
	sig := hex.EncodeToString(providerjob.SignSHA1(vendorSecret, body))
	v.mu.Lock()
	if progress {
		j.progress++
	} else {
		if j.deliveries > 0 {
			j.duplicates++
		}
		j.deliveries++
	}
	v.mu.Unlock()
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		node := v.nodes[rand.IntN(len(v.nodes))]
		req, _ := http.NewRequest(http.MethodPost, "http://"+node+j.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Signature-SHA1", sig)
		resp, err := client.Do(req)
		status := 0
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		v.mu.Lock()
		switch {
		case status == http.StatusOK:
			if !progress {
				j.acked = true
			}
			v.mu.Unlock()
			return
		case err != nil || status >= 500 || status == http.StatusTooManyRequests:
			j.retries++
		default:
			j.refused = append(j.refused, fmt.Sprintf("%d from %s", status, node))
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		if time.Now().After(v.until) {
			return
		}
		time.Sleep(100*time.Millisecond + rand.N(200*time.Millisecond))
	}
}

// Wait waits for every job's deliveries to end, or d.
func (v *chaosVendor) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { v.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Effects answers a copy of the submissions, by action.
func (v *chaosVendor) Effects() map[string][]effect {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string][]effect{}
	for id, es := range v.posts {
		out[id] = append([]effect(nil), es...)
	}
	return out
}

// Jobs answers a copy of the jobs taken.
func (v *chaosVendor) Jobs() map[string]vendorJob {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]vendorJob{}
	for id, j := range v.jobs {
		c := *j
		c.refused = append([]string(nil), j.refused...)
		out[id] = c
	}
	return out
}

// providerJobRow is a provider job as its store holds it.
type providerJobRow struct {
	id, state, usageID string
	costCents          int64
}

// usageRow is a usage row of the submit tool.
type usageRow struct {
	id        string
	costCents int64
}

// providerJobsOf reads a cluster's provider jobs and the submit tool's
// usage rows, through the query runner of its database.
func providerJobsOf(ctx context.Context, query rowQuery) (map[string]providerJobRow, []usageRow, error) {
	jobs := map[string]providerJobRow{}
	err := query(ctx, `SELECT id, state, COALESCE(usage_id, ''), cost_cents FROM provider_jobs WHERE provider = '`+vendorName+`'`, func(scan func(...any) error) error {
		var r providerJobRow
		if err := scan(&r.id, &r.state, &r.usageID, &r.costCents); err != nil {
			return err
		}
		jobs[r.id] = r
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("provider jobs: %w", err)
	}
	var usage []usageRow
	err = query(ctx, `SELECT id, cost_cents FROM usage WHERE tool = '`+vendorTool+`'`, func(scan func(...any) error) error {
		var u usageRow
		if err := scan(&u.id, &u.costCents); err != nil {
			return err
		}
		usage = append(usage, u)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("usage: %w", err)
	}
	return jobs, usage, nil
}

// rowQuery runs a query and calls row with each row's scanner.
type rowQuery func(ctx context.Context, q string, row func(scan func(...any) error) error) error

// pgQuery runs q on pool, calling row with each row's scanner.
func pgQuery(pool *pgxpool.Pool) rowQuery {
	return func(ctx context.Context, q string, row func(func(...any) error) error) error {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := row(func(dst ...any) error { return rows.Scan(dst...) }); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

// sqliteQuery runs q on db, calling row with each row's scanner.
func sqliteQuery(db *sql.DB) rowQuery {
	return func(ctx context.Context, q string, row func(func(...any) error) error) error {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := row(func(dst ...any) error { return rows.Scan(dst...) }); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

// providerTally is what one cluster's provider jobs came to.
type providerTally struct {
	jobs, vendorPosts, deliveries, duplicates, progress, retries, refused int
	settled, unsettled, usageRows, doubled, unsent                        int
	// events are the jobs' own audit events; unaudited the jobs whose
	// ending or settlement has not exactly one.
	events, unaudited int
}

// judgeProviderJobs holds a cluster's provider jobs, once the vendor's
// deliveries were acknowledged and the settle time is over: every job the
// vendor ended (its terminal report acknowledged) is in that state and
// settled once, its usage_id naming the one usage row of its job, at the
// reported cost (unsettled); the submit tool has no usage row but those
// (usage_doubled); no delivery was refused (webhook_refused); and a
// settled job has exactly one audit event of its ending and one of its
// settlement, however many deliveries and settlement runs it had
// (job_audit).
func judgeProviderJobs(cluster string, vendor map[string]vendorJob, posts map[string][]effect, rows map[string]providerJobRow, usage []usageRow,
	events map[string]map[string]int) (*providerTally, []string) {
	var violations []string
	tl := &providerTally{}
	for _, es := range posts {
		tl.vendorPosts += len(es)
	}
	byID := map[string][]usageRow{}
	for _, u := range usage {
		byID[u.id] = append(byID[u.id], u)
	}
	tl.usageRows = len(usage)
	for id, j := range vendor {
		tl.jobs++
		tl.deliveries += j.deliveries
		tl.duplicates += j.duplicates
		tl.progress += j.progress
		tl.retries += j.retries
		tl.refused += len(j.refused)
		if len(j.refused) > 0 {
			violations = append(violations, fmt.Sprintf("webhook_refused: job %s over %s: deliveries answered %v", id, cluster, j.refused))
		}
		row, ok := rows[id]
		want := map[string]string{"FINISHED": "completed", "FAILED": "failed"}[j.state]
		switch {
		case !j.acked:
			violations = append(violations, fmt.Sprintf("webhook_refused: job %s over %s: its %s report was never acknowledged (%d retries)", id, cluster, j.state, j.retries))
		case !ok:
			violations = append(violations, fmt.Sprintf("unsettled: job %s over %s: the vendor took it and called it back, and no provider job is stored", id, cluster))
		case row.state != want:
			violations = append(violations, fmt.Sprintf("unsettled: job %s over %s: reported %s, stored %s", id, cluster, j.state, row.state))
		case row.usageID != providerjob.UsageID(id):
			tl.unsettled++
			violations = append(violations, fmt.Sprintf("unsettled: job %s over %s: %s, usage_id %q after the settle time", id, cluster, row.state, row.usageID))
		case len(byID[row.usageID]) != 1 || byID[row.usageID][0].costCents != j.credits*centsPerCredit:
			tl.unsettled++
			violations = append(violations, fmt.Sprintf("unsettled: job %s over %s: usage rows %v, want one of %d cents", id, cluster, byID[row.usageID], j.credits*centsPerCredit))
		default:
			tl.settled++
			if ev := events[id]; ev["provider_job_"+row.state] != 1 || ev["provider_job_settled"] != 1 {
				tl.unaudited++
				violations = append(violations, fmt.Sprintf("job_audit: job %s over %s: %s and settled, with audit events %v", id, cluster, row.state, ev))
			}
		}
	}
	for id, ev := range events {
		if _, ok := rows[id]; ok {
			for _, n := range ev {
				tl.events += n
			}
		}
	}
	for id, row := range rows {
		if _, ok := vendor[id]; !ok {
			// Reserved, and its node died before the vendor call: nothing
			// was sent, nothing is owed.
			tl.unsent++
			if row.usageID != "" {
				violations = append(violations, fmt.Sprintf("usage_doubled: job %s over %s was never sent, and is settled (%s)", id, cluster, row.usageID))
			}
		}
	}
	for id, us := range byID {
		job, ok := strings.CutPrefix(id, "use_")
		if _, known := rows[job]; !ok || !known || len(us) > 1 {
			tl.doubled += len(us)
			violations = append(violations, fmt.Sprintf("usage_doubled: %d usage row(s) %s of %s over %s, which are no job's one settlement", len(us), id, vendorTool, cluster))
		}
	}
	return tl, violations
}

// buildChaosNode compiles internal/chaosnode (the toolplane binary with
// the submit tool compiled in) once per test process, beside the
// toolplane binary.
var buildChaosNode = sync.OnceValues(func() (string, error) {
	if _, err := build(); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "chaosnode")
	args := []string{"build", "-o", bin}
	if raceTest() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../../internal/chaosnode")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(err.Error() + ": " + string(out))
	}
	return bin, nil
})
