package cli

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/internal/server"
)

// anomalyOptions are serve's flags of the anomaly triage.
type anomalyOptions struct {
	mode      *string
	threshold *float64
	window    *time.Duration
	notify    *bool
}

// anomalyFlags declares serve's anomaly triage flags on fs.
func anomalyFlags(fs *pflag.FlagSet) *anomalyOptions {
	return &anomalyOptions{
		mode: fs.String("anomaly", "on", "the anomaly triage: on (per agent and tool, a rolling baseline of calls, refusals, errors and spend read from the audit trail; a window beyond --anomaly-threshold files an item for auditors at /v1/anomalies and in the console) or off"),
		threshold: fs.Float64("anomaly-threshold", anomaly.DefaultThreshold,
			"how many standard deviations above its baseline a window's value must be to be flagged (the deviation is floored so a quiet baseline does not flag a single refusal)"),
		window: fs.Duration("anomaly-window", anomaly.DefaultWindow, "the width of one anomaly window (at least a minute); the baseline spans 24 of them"),
		notify: fs.Bool("anomaly-notify", false, "tell of every anomaly item filed on its organization's default notification channels, as an uncertain call is told"),
	}
}

// apply sets cfg's anomaly triage from the flags.
func (o *anomalyOptions) apply(cfg *server.Config) error {
	switch *o.mode {
	case "on":
	case "off":
		cfg.AnomalyOff = true
		return nil
	default:
		return fmt.Errorf("--anomaly: %q is neither on nor off", *o.mode)
	}
	cfg.AnomalyWindow, cfg.AnomalyThreshold, cfg.AnomalyNotify = *o.window, *o.threshold, *o.notify
	return nil
}
