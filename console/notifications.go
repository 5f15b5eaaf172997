package console

import (
	"context"
	"net/http"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/signin"
)

// Notifications is what the notifications page reads (*notify.Service):
// the deliveries that failed for good, newest first, under the service's
// own rule of who may read them.
type Notifications interface {
	DeadLetters(ctx context.Context, limit int, by *toolplane.Credential) ([]toolplane.NotificationDelivery, error)
}

func (c *Console) notificationRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/notifications", c.page(c.deadLetters))
}

type notificationsPage struct {
	frame
	// Configured is false when the server sends no notifications.
	Configured bool
	Dead       []toolplane.NotificationDelivery
}

// deadLetters shows the deliveries that failed for good: each was tried
// until its attempts ran out, and its channel's secondary (if any) was
// told instead. A person reads it to see who was never reached.
func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	v := notificationsPage{frame: c.frameFor(sess, "Notifications", "notifications")}
	if c.cfg.Notifications != nil {
		dead, err := c.cfg.Notifications.DeadLetters(r.Context(), pageSize, sess.Credential)
		if err != nil {
			return err
		}
		v.Configured, v.Dead = true, dead
	}
	c.render(w, r, http.StatusOK, "notifications", v)
	return nil
}
