package server

import (
	"fmt"
	"math"
	"time"

	"github.com/toolplane/toolplane/anomaly"
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

// buildAnomalies answers the anomaly triage over the node's store, nil
// when it is off.
func (s *Server) buildAnomalies() (*anomaly.Service, error) {
	if s.cfg.AnomalyOff {
		return nil, nil
	}
	svc, err := anomaly.New(s.b.Store, anomaly.Config{Window: s.cfg.AnomalyWindow, Threshold: s.cfg.AnomalyThreshold, Logger: s.log})
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
