package engine

import (
	"context"
	"errors"

	"github.com/streamer/streamer/online/refit"
)

// refitReporter returns what model's refits report to (refit.Model.OnRefit):
// the metrics, through refitted.
func (m *engineMetrics) refitReporter(model string) func(refit.Report) {
	return func(r refit.Report) { m.refitted(model, r) }
}

// refitted records a refit report (called from the model's refit goroutine).
func (m *engineMetrics) refitted(model string, r refit.Report) {
	outcome := "accepted"
	switch {
	case r.Rejected:
		outcome = "rejected"
	case errors.Is(r.Err, context.Canceled):
		outcome = "cancelled"
	case r.Err != nil:
		outcome = "failed"
	}
	m.refits.WithLabelValues(model, outcome).Inc()
	m.refitSeconds.WithLabelValues(model).Observe(r.Duration.Seconds())
	if r.Accepted {
		m.refitWindow.WithLabelValues(model).Set(float64(r.Window))
		m.refitSV.WithLabelValues(model).Set(float64(r.Stats.SupportVectors))
		m.refitObj.WithLabelValues(model).Set(r.Stats.Objective)
		m.refitAt.WithLabelValues(model).SetToCurrentTime()
		m.version.WithLabelValues(model).Set(float64(r.Version))
	}
}
