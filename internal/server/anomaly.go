package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
)

// minAnomalyWindow is the narrowest anomaly window: narrower windows
// hold too few calls to judge, and fold the audit trail too often.
const minAnomalyWindow = time.Minute

// checkAnomaly refuses an anomaly window or threshold no triage runs
// with.
func (c Config) checkAnomaly() error {
	if c.AnomalyWindow != 0 && c.AnomalyWindow < minAnomalyWindow {
		return &ConfigError{Field: "AnomalyWindow", Err: fmt.Errorf("%v is shorter than %v", c.AnomalyWindow, minAnomalyWindow)}
	}
	if t := c.AnomalyThreshold; t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
		return &ConfigError{Field: "AnomalyThreshold", Err: fmt.Errorf("%v is not a positive number of standard deviations", t)}
	}
	return nil
}

// anomalyNotice tells of the items the triage files through the node's
// runner, once it is built (the runner is built after the triage it
// runs).
type anomalyNotice struct {
	mu sync.RWMutex
	r  backend.Runner
}

func (n *anomalyNotice) use(r backend.Runner) {
	n.mu.Lock()
	n.r = r
	n.mu.Unlock()
}

func (n *anomalyNotice) tell(ctx context.Context, a *toolplane.Anomaly) error {
	n.mu.RLock()
	r := n.r
	n.mu.RUnlock()
	if r == nil {
		return errors.New("the background work is not running yet")
	}
	return r.AnomalyFiled(ctx, a)
}

// buildAnomalies answers the anomaly triage over the node's store, nil
// when it is off. With AnomalyNotify, each item filed is told through
// notice.
func (s *Server) buildAnomalies(notice *anomalyNotice) (*anomaly.Service, error) {
	if s.cfg.AnomalyOff {
		return nil, nil
	}
	cfg := anomaly.Config{Window: s.cfg.AnomalyWindow, Threshold: s.cfg.AnomalyThreshold, Logger: s.log}
	if s.cfg.AnomalyNotify {
		cfg.Notice = notice.tell
	}
	svc, err := anomaly.New(s.b.Store, cfg)
	if err != nil {
		return nil, fmt.Errorf("anomaly triage: %w", err)
	}
	return svc, nil
}

// anomalyJob answers the background work's view of the triage: none
// when it is off (a nil *anomaly.Service in the interface would not be
// nil).
func anomalyJob(svc *anomaly.Service) jobs.Anomalies {
	if svc == nil {
		return nil
	}
	return svc
}
