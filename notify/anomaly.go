package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// AnomalyFiled: the anomaly triage filed an item (a new one; a
// deviation that goes on updates its open item and is not told again).
const AnomalyFiled Event = "anomaly_filed"

// anomalyPrefix begins an anomaly item's delivery subject.
const anomalyPrefix = "anomaly:"

// AnomalySubject names an anomaly item as a delivery's subject.
func AnomalySubject(id string) string { return anomalyPrefix + id }

// AnomalyContext is what a person needs to look at a triage item. The
// agent and tool names are data to be shown, never interpreted.
type AnomalyContext struct {
	ID          string    `json:"id"`
	AgentID     string    `json:"agent_id"`
	Tool        string    `json:"tool"`
	Signal      string    `json:"signal"`
	Observed    float64   `json:"observed"`
	Mean        float64   `json:"mean"`
	StdDev      float64   `json:"stddev"`
	Score       float64   `json:"score"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Status      string    `json:"status"`
}

// anomalyReader is what the service reads an item through: a store
// with the anomaly triage. A store without it tells no anomaly.
type anomalyReader interface {
	GetAnomaly(ctx context.Context, org, id string) (*toolplane.Anomaly, error)
}

// ForAnomaly answers the deliveries telling that item a was filed, on
// the organization's default channels, as an uncertain call is told.
func (s *Service) ForAnomaly(ctx context.Context, a *toolplane.Anomaly) ([]Delivery, error) {
	chans, err := s.channelsFor(ctx, a.OrganizationID, "")
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(chans))
	for _, ch := range chans {
		out = append(out, Delivery{Org: a.OrganizationID, Event: AnomalyFiled, Subject: AnomalySubject(a.ID), Channel: ch})
	}
	return out, nil
}

// anomalyPayload fills p for a delivery whose subject is an anomaly
// item, and reports whether the subject is one.
func (s *Service) anomalyPayload(ctx context.Context, d Delivery, p *Payload) (bool, error) {
	id, ok := strings.CutPrefix(d.Subject, anomalyPrefix)
	if !ok {
		return false, nil
	}
	r, ok := s.store.(anomalyReader)
	if !ok {
		return true, fmt.Errorf("%w: this store keeps no anomaly triage", ErrGone)
	}
	a, err := r.GetAnomaly(ctx, d.Org, id)
	if errors.Is(err, toolplane.ErrNotFound) {
		return true, fmt.Errorf("%w: anomaly %s", ErrGone, id)
	}
	if err != nil {
		return true, err
	}
	p.Anomaly = &AnomalyContext{ID: a.ID, AgentID: a.AgentID, Tool: a.Tool, Signal: string(a.Signal), Observed: a.Observed,
		Mean: a.Mean, StdDev: a.StdDev, Score: a.Score, WindowStart: a.WindowStart.UTC(), WindowEnd: a.WindowEnd.UTC(), Status: string(a.Status)}
	if s.public != "" {
		p.Link = s.public + "/console/anomalies"
	}
	return true, nil
}
