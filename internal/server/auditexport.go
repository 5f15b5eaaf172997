package server

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditexport"
	"github.com/toolplane/toolplane/auditexport/jetstreamsink"
	"github.com/toolplane/toolplane/internal/metrics"
)

// auditExports builds the configured audit exports, registers their
// sinks (from now on every event stored is queued for them) and starts
// draining; the server stops them after the audit writer has stored what
// it held. No sink configured: nothing is queued, nothing runs.
func (s *Server) auditExports(ctx context.Context, m *metrics.Metrics) (*auditexport.Exporters, error) {
	var list []*auditexport.Exporter
	add := func(sink auditexport.Sink) {
		list = append(list, auditexport.New(auditexport.Config{Store: s.b.Store, Sink: sink, Log: s.log}))
	}
	if (s.cfg.AuditExportNATS == "") != (s.cfg.AuditExportNATSStream == "") {
		return nil, fmt.Errorf("%w: a JetStream audit export needs both the server URL and the stream", toolplane.ErrInvalid)
	}
	if s.cfg.AuditExportNATS != "" {
		sink, err := jetstreamsink.New(jetstreamsink.Config{URL: s.cfg.AuditExportNATS, Stream: s.cfg.AuditExportNATSStream})
		if err != nil {
			return nil, err
		}
		add(sink)
	}
	if s.cfg.AuditExportDir != "" {
		sink, err := auditexport.NewFiles(auditexport.FileConfig{Dir: s.cfg.AuditExportDir})
		if err != nil {
			return nil, err
		}
		add(sink)
	}
	exports := auditexport.NewExporters(list...)
	if len(list) == 0 {
		return exports, nil
	}
	lags := make([]metrics.ExportLag, len(list))
	for i, x := range list {
		lags[i] = x
	}
	m.WatchExports(lags, s.log)
	if err := exports.Start(ctx); err != nil {
		exports.Stop()
		return nil, err
	}
	s.closers = append(s.closers, func() {
		if err := exports.Stop(); err != nil {
			s.log.Error("shutdown: audit export", "err", err)
		}
	})
	return exports, nil
}
