package providerjob_test

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/providerjob"
)

// The timestamped scheme: a signature over the timestamp and the body,
// any of several v1 (a vendor rotating its secret), within the
// tolerance; anything else is ErrSignature.
func TestTimestampedVerify(t *testing.T) {
	t.Parallel()
	a := &providerjob.Timestamped{Name: "payments", Secret: "k1"}
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	good := providerjob.SignTimestamped("k1", now, body)
	_, v1, _ := strings.Cut(good, ",")
	rotated := providerjob.SignTimestamped("k0", now, body) + "," + v1
	for _, tt := range []struct {
		name   string
		header string
		body   []byte
		ok     bool
	}{
		{"signed", good, body, true},
		{"rotation", rotated, body, true},
		{"another body", good, []byte(`{"id":"evt_2"}`), false},
		{"another key", providerjob.SignTimestamped("k2", now, body), body, false},
		{"stale", providerjob.SignTimestamped("k1", now.Add(-6*time.Minute), body), body, false},
		{"early", providerjob.SignTimestamped("k1", now.Add(6*time.Minute), body), body, false},
		{"no timestamp", v1, body, false},
		{"no signature", "t=1800000000", body, false},
		{"empty", "", body, false},
		{"not hex", "t=1800000000,v1=zz", body, false},
	} {
		h := http.Header{}
		h.Set("Stripe-Signature", tt.header)
		err := a.Verify(tt.body, h, now)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, providerjob.ErrSignature) {
			t.Errorf("%s: %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	if err := (&providerjob.Timestamped{Name: "x"}).Verify(body, http.Header{"Stripe-Signature": {good}}, now); !errors.Is(err, providerjob.ErrSignature) {
		t.Errorf("an adapter without a secret verified: %v", err)
	}
}

// The body-signed scheme: the HMAC-SHA1 of the raw body; the delivery
// id is the body's digest, the same for a retry and another for another
// body; the batch's vocabulary maps onto the job's states.
func TestBodySigned(t *testing.T) {
	t.Parallel()
	a := &providerjob.BodySigned{Name: "fullenrich", Secret: "k", CentsPerCredit: 7}
	body := []byte(`{"id":"b-1","name":"toolplane:pj_1","status":"FINISHED","cost":{"credits":3},"data":[{"ref":"a"}]}`)
	sig := hex.EncodeToString(providerjob.SignSHA1("k", body))
	for _, tt := range []struct {
		name, sig string
		ok        bool
	}{{"signed", sig, true}, {"prefixed", "sha1=" + sig, true}, {"forged", hex.EncodeToString(providerjob.SignSHA1("j", body)), false},
		{"none", "", false}, {"truncated", sig[:20], false}} {
		h := http.Header{}
		h.Set("X-Signature-SHA1", tt.sig)
		if err := a.Verify(body, h, time.Now()); (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	if a.DeliveryID(body, nil) != a.DeliveryID(append([]byte(nil), body...), nil) || a.DeliveryID(body, nil) == a.DeliveryID([]byte(`{}`), nil) {
		t.Error("delivery ids do not follow the body")
	}
	u, err := a.Read(body)
	if err != nil || u.JobID != "pj_1" || u.ProviderJobID != "b-1" || u.State != toolplane.JobCompleted || u.CostCents != 21 || u.Units != 3 {
		t.Errorf("Read = %+v, %v", u, err)
	}
	for status, want := range map[string]toolplane.ProviderJobState{"IN_PROGRESS": toolplane.JobRunning, "CANCELED": toolplane.JobCancelled,
		"CREDITS_INSUFFICIENT": toolplane.JobFailed, "finished": toolplane.JobCompleted} {
		u, err := a.Read([]byte(`{"id":"b","status":"` + status + `"}`))
		if err != nil || u.State != want {
			t.Errorf("%s = %+v, %v; want %s", status, u, err, want)
		}
	}
	if _, err := a.Read([]byte(`{"status":"WHATEVER"}`)); err == nil {
		t.Error("an unknown status was read")
	}
}

// FuzzAdapters: no body or header makes an adapter panic, verifies
// without the key, or reads a state that is not one of the job's.
func FuzzAdapters(f *testing.F) {
	f.Add([]byte(`{"id":"b-1","name":"toolplane:pj_1","status":"FINISHED","cost":{"credits":3},"data":[]}`), "t=1,v1=00")
	f.Add([]byte(`{"id":"evt","data":{"object":{"id":"x","status":"succeeded","metadata":{"toolplane_job_id":"pj"}}}}`), "")
	f.Add([]byte(`[]`), "v1=,t=")
	adapters := []providerjob.Adapter{&providerjob.BodySigned{Name: "b", Secret: "k"}, &providerjob.Timestamped{Name: "t", Secret: "k"}}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		h := http.Header{}
		h.Set("X-Signature-SHA1", header)
		h.Set("Stripe-Signature", header)
		for _, a := range adapters {
			if a.Verify(body, h, time.Unix(1, 0)) == nil {
				t.Fatalf("%s verified a delivery nobody signed: %q %q", a.Provider(), body, header)
			}
			_ = a.DeliveryID(body, h)
			if u, err := a.Read(body); err == nil && !u.State.Valid() {
				t.Fatalf("%s read state %q", a.Provider(), u.State)
			}
		}
	})
}
