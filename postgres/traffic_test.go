package postgres

import (
	"testing"

	"github.com/toolplane/toolplane/storetest"
)

func TestTraffic(t *testing.T) {
	t.Parallel()
	storetest.RunTraffic(t, func(t *testing.T) storetest.TrafficStore { return newTestStore(t) })
}
