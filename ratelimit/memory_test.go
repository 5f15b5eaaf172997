package ratelimit_test

import (
	"testing"

	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/ratelimit/ratelimittest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	s := ratelimit.NewMemory()
	ratelimittest.Run(t, func(*testing.T) ratelimit.Store { return s })
}
