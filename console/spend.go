package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/spend"
)

func (c *Console) spendRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/spend", c.page(c.spendReport))
}

// spendSearch is the report form as sent: dates (YYYY-MM-DD, UTC) and a
// grouping.
type spendSearch struct {
	From, To, By string
}

type spendPage struct {
	frame
	Search spendSearch
	Groups []toolplane.SpendBy
	Status *spend.Status
	Report *spend.Report
}

// cents writes an amount of cents as dollars, for a person to read.
func cents(n int64) string {
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	return fmt.Sprintf("%s$%d.%02d", sign, n/100, n%100)
}

func (c *Console) spendReport(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	if c.cfg.Spend == nil {
		return fmt.Errorf("%w: spend reports are not enabled on this server", toolplane.ErrNotFound)
	}
	q := r.URL.Query()
	search := spendSearch{From: q.Get("from"), To: q.Get("to"), By: q.Get("by")}
	query := spend.Query{By: toolplane.SpendBy(search.By)}
	for _, f := range []struct {
		name, v string
		at      *time.Time
	}{{"from", search.From, &query.From}, {"to", search.To, &query.To}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, f.v)
		if err != nil {
			return fmt.Errorf("%w: %s is a date, YYYY-MM-DD (UTC)", toolplane.ErrInvalid, f.name)
		}
		*f.at = t
	}
	if !query.To.IsZero() {
		query.To = query.To.AddDate(0, 0, 1) // the form's last day is included
	}
	rep, err := c.cfg.Spend.Report(r.Context(), sess.Credential, query)
	if err != nil {
		return err
	}
	st, err := c.cfg.Spend.Ceiling(r.Context(), sess.Credential)
	if err != nil {
		return err
	}
	search.By = string(rep.By)
	v := spendPage{frame: c.frameFor(sess, "Spend", "spend"), Search: search, Status: st, Report: rep,
		Groups: []toolplane.SpendBy{toolplane.SpendByDay, toolplane.SpendByAgent, toolplane.SpendByTool}}
	c.render(w, r, http.StatusOK, "spend", v)
	return nil
}
