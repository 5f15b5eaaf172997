package console

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/signin"
)

func (c *Console) anomalyRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/anomalies", c.page(c.anomalyList))
	mux.Handle("POST "+Path+"/anomalies/acknowledge", c.action(c.acknowledgeAnomaly))
}

// anomalies answers the triage, or that this server runs none.
func (c *Console) anomalies() (*anomaly.Service, error) {
	if c.cfg.Anomalies == nil {
		return nil, fmt.Errorf("%w: the anomaly triage is off on this server", toolplane.ErrNotFound)
	}
	return c.cfg.Anomalies, nil
}

type anomaliesPage struct {
	frame
	Items []toolplane.Anomaly
	Next  string
	// Acknowledged is set when the page lists the acknowledged items
	// rather than the open ones; Other links the other list.
	Acknowledged bool
	Other        string
	Action, CSRF string
}

// anomalyList shows the organization's open triage items (or, with
// ?status=acknowledged, those already seen), newest first, each with
// what was observed and the baseline it left, and a button to
// acknowledge it.
func (c *Console) anomalyList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.anomalies()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	status, other := toolplane.AnomalyOpen, url.Values{"status": {string(toolplane.AnomalyAcknowledged)}}
	if q.Get("status") == string(toolplane.AnomalyAcknowledged) {
		status, other = toolplane.AnomalyAcknowledged, nil
	}
	items, next, err := svc.List(r.Context(), status, q.Get("cursor"), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	v := anomaliesPage{frame: c.frameFor(sess, "Anomalies", "anomalies"), Items: items, Acknowledged: status == toolplane.AnomalyAcknowledged,
		Other: c.path("/anomalies"), Action: c.path("/anomalies/acknowledge"), CSRF: sess.CSRF}
	if other != nil {
		v.Other += "?" + other.Encode()
	}
	if q.Get("done") != "" {
		v.Notice = "Acknowledged: the next deviation of that agent, tool and signal files a new item."
	}
	if next != "" {
		v.Next = c.path("/anomalies") + "?" + url.Values{"status": {string(status)}, "cursor": {next}}.Encode()
	}
	c.render(w, r, http.StatusOK, "anomalies", v)
	return nil
}

// acknowledgeAnomaly acknowledges one item, as the signed-in person.
func (c *Console) acknowledgeAnomaly(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.anomalies()
	if err != nil {
		return err
	}
	id := r.PostFormValue("id")
	if err := toolplane.CheckLen("id", id, toolplane.MaxRefLen); err != nil {
		return err
	}
	if _, err := svc.Acknowledge(r.Context(), id, sess.Credential); err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/anomalies")+"?done=1", http.StatusSeeOther)
	return nil
}
