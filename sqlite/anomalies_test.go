package sqlite

import (
	"testing"

	"github.com/toolplane/toolplane/storetest"
)

func TestAnomalies(t *testing.T) {
	t.Parallel()
	storetest.RunAnomalies(t, func(t *testing.T) storetest.AnomalyStore { return newTestStore(t) })
}
