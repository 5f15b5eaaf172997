package discoveryeval

import (
	"context"
	"testing"
	"time"

	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/offline"
)

func TestZZCache(t *testing.T) {
	reg, _ := LargeRegistry(LatencyTools)
	x := discovery.New(offline.Options())
	x.Rebuild(reg.Every())
	c := reg.Tools("")
	for i := 0; i < 5; i++ {
		st := time.Now()
		x.Search(context.Background(), "", c, discovery.Query{Text: "refund the customer"})
		t.Logf("%v", time.Since(st))
	}
	c2 := reg.Tools("")
	t.Logf("same slice ptr %v len %d", &c[0] == &c2[0], len(c))
}
