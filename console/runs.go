package console

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/runs"
	"github.com/toolplane/toolplane/signin"
)

// runRoutes registers the run page. It has no entry in the navigation:
// a run is reached from the run ids the other pages link.
func (c *Console) runRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/runs/{id}", c.page(c.runPage))
}

// runPath answers the console's page of run id: the link every run id
// shown in the console is.
func (c *Console) runPath(id string) string { return c.path("/runs/" + url.PathEscape(id)) }

type runPage struct {
	frame
	Run *runs.Run
	// Status is the run's status in words; Attention is set when a
	// person must act on it.
	Status    string
	Attention bool
}

// statusWords are what the page says of each run status.
var statusWords = map[runs.Status]string{
	runs.StatusUncertain: "An action may or may not have happened: reconcile it",
	runs.StatusWaiting:   "Waiting for an approval",
	runs.StatusFailed:    "Its last call failed",
	runs.StatusOK:        "Nothing waits",
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	if c.cfg.Runs == nil {
		return fmt.Errorf("%w: run pages are not enabled on this server", toolplane.ErrNotFound)
	}
	run, err := c.cfg.Runs.Get(r.Context(), r.PathValue("id"), sess.Credential)
	if err != nil {
		return err
	}
	v := runPage{frame: c.frameFor(sess, "Run "+run.ID, ""), Run: run, Status: statusWords[run.Status],
		Attention: run.Status == runs.StatusUncertain || run.Status == runs.StatusWaiting}
	c.render(w, r, http.StatusOK, "run", v)
	return nil
}
