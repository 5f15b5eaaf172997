package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/providerjob"
	"github.com/toolplane/toolplane/upstream"
)

type enrichIn struct {
	Refs []string `json:"refs"`
}

type jobIn struct {
	JobID string `json:"job_id"`
}

// enrichTools are a submit and a collect tool over the node's provider
// jobs, whose vendor answers vendorID.
func enrichTools(vendorID string) ProviderJobTools {
	return func(jobs *providerjob.Service) ([]toolplane.Definition, []*handler.Binding, error) {
		no := false
		submit, err := handler.Define[enrichIn, providerjob.Submitted](toolplane.Definition{
			Name: "vendor.submit", Version: "1.0.0", Description: "Submit contacts for enrichment.",
			Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "vendor.submit"}},
			Effect: toolplane.EffectWrite, Repeatable: &no})
		if err != nil {
			return nil, nil, err
		}
		collect, err := handler.Define[jobIn, providerjob.Collected](toolplane.Definition{
			Name: "vendor.collect", Version: "1.0.0", Description: "Read an enrichment job.",
			Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "vendor.collect"}},
			Effect: toolplane.EffectRead})
		if err != nil {
			return nil, nil, err
		}
		sb, _ := handler.Bind("vendor.submit", func(ctx context.Context, call handler.Call, in enrichIn) (providerjob.Submitted, error) {
			out, err := jobs.Submit(ctx, call, providerjob.Submission{Provider: "fullenrich", Refs: in.Refs},
				func(context.Context, *toolplane.ProviderJob, string) (string, error) { return vendorID, nil })
			if err != nil {
				return providerjob.Submitted{}, err
			}
			return *out, nil
		}, nil)
		cb, _ := handler.Bind("vendor.collect", func(ctx context.Context, call handler.Call, in jobIn) (providerjob.Collected, error) {
			out, err := jobs.Collect(ctx, call, "fullenrich", in.JobID)
			if err != nil {
				return providerjob.Collected{}, err
			}
			return *out, nil
		}, nil)
		return []toolplane.Definition{submit, collect}, []*handler.Binding{sb, cb}, nil
	}
}

// A served node takes a provider job end to end: a submit over REST, the
// vendor's signed callback at the webhook route, the settlement in the
// background, a collect over REST; a dropped delivery is counted in the
// metrics, and a bad configuration is refused.
func TestServedProviderJob(t *testing.T) {
	t.Parallel()
	no := false
	r := start(t, Config{ProviderWebhooks: []ProviderWebhook{{Provider: "fullenrich", Scheme: SchemeBodySHA1, Secret: "whsec", CentsPerCredit: 10}},
		ProviderJobTools: enrichTools("batch-1")}, upstream.Relax{Effect: toolplane.EffectRead, RequiresApproval: &no})
	if status, got := post(t, r.base, "/v1/grants", r.admin, `{"agent_id":"demo-agent","pattern":"vendor.*"}`); status != http.StatusCreated {
		t.Fatalf("grant: %d %s", status, got)
	}
	status, got := post(t, r.base, "/v1/tools/vendor.submit/invoke", r.agent, `{"arguments":{"refs":["c1","c2"]},"run_id":"run-1"}`)
	var answer struct {
		OK   bool                  `json:"ok"`
		Data providerjob.Submitted `json:"data"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(got), &answer) != nil || !answer.OK || !answer.Data.Confirmed {
		t.Fatalf("submit: %d %s", status, got)
	}
	id := answer.Data.JobID
	body := `{"id":"batch-1","name":"toolplane:` + id + `","status":"FINISHED","cost":{"credits":3},"data":[{"ref":"c1","email":"a@b.example"}]}`
	callback := func(path, body, sig string) int {
		req, _ := http.NewRequest(http.MethodPost, r.base+path, strings.NewReader(body))
		req.Header.Set("X-Signature-SHA1", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// A person long-polls the job before its vendor calls back: the
	// callback ends the wait, long before it runs out.
	waited := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, r.base+"/v1/provider-jobs/"+id+"?wait=30s", nil)
		req.Header.Set("Authorization", "Bearer "+r.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			waited <- err.Error()
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		waited <- fmt.Sprint(resp.StatusCode, " ", string(raw))
	}()
	sig := hex.EncodeToString(providerjob.SignSHA1("whsec", []byte(body)))
	if code := callback("/v1/webhooks/fullenrich/"+id, body, "00"+sig[2:]); code != http.StatusUnauthorized {
		t.Errorf("forged callback = %d, want 401", code)
	}
	if code := callback("/v1/webhooks/fullenrich/"+id, body, sig); code != http.StatusOK {
		t.Fatalf("callback = %d", code)
	}
	select {
	case got := <-waited:
		if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"state":"completed"`) {
			t.Errorf("the long-poll: %s", got)
		}
	case <-time.After(20 * time.Second):
		t.Error("the callback did not end the long-poll")
	}
	if code := callback("/v1/webhooks/fullenrich/pj_unknown", body, sig); code != http.StatusOK {
		t.Errorf("unknown job = %d, want an ACK", code)
	}
	if code := callback("/v1/webhooks/nobody/"+id, body, sig); code != http.StatusNotFound {
		t.Errorf("unknown provider = %d, want 404", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := r.s.b.Store.GetProviderJob(context.Background(), DefaultOrganization, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.UsageID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %+v", j)
		}
		time.Sleep(20 * time.Millisecond)
	}
	status, got = post(t, r.base, "/v1/tools/vendor.collect/invoke", r.agent, `{"arguments":{"job_id":"`+id+`"},"run_id":"run-1"}`)
	if status != http.StatusOK || !strings.Contains(got, `"state":"completed"`) || !strings.Contains(got, "a@b.example") || !strings.Contains(got, `"settled":true`) {
		t.Errorf("collect: %d %s", status, got)
	}
	if cost, err := r.s.b.Store.RunTreeCost(context.Background(), DefaultOrganization, "run-1"); err != nil || cost != 30 {
		t.Errorf("run tree cost %d, %v; want 30", cost, err)
	}
	get := func(key string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, r.base+"/v1/provider-jobs/unsettled?limit=10", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if status, got := get(r.admin); status != http.StatusOK || got != `{"items":[]}`+"\n" {
		t.Errorf("unsettled jobs, settled all: %d %q", status, got)
	}
	if status, _ := get(r.agent); status != http.StatusForbidden {
		t.Errorf("an agent listed unsettled jobs: %d", status)
	}
	resp, err := http.Get(r.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`toolplane_webhook_drops_total{provider="fullenrich",reason="unknown_job"} 1`,
		`toolplane_webhook_drops_total{provider="fullenrich",reason="bad_signature"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(metrics), "whsec") {
		t.Error("the signing secret is in the metrics")
	}

	for _, bad := range [][]ProviderWebhook{
		{{Provider: "fullenrich", Scheme: SchemeBodySHA1}},
		{{Provider: "Full Enrich", Scheme: SchemeBodySHA1, Secret: "s"}},
		{{Provider: "x", Scheme: "md5", Secret: "s"}},
		{{Provider: "x", Scheme: SchemeTimestamped, Secret: "s"}, {Provider: "x", Scheme: SchemeTimestamped, Secret: "s"}},
	} {
		_, err := Config{ProviderWebhooks: bad}.withDefaults()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "ProviderWebhooks" || strings.Contains(err.Error(), `"s"`) {
			t.Errorf("%+v: %v, want a ProviderWebhooks error naming no secret", bad, err)
		}
	}
}
