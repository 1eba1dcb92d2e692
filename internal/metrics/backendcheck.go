package metrics

import "fmt"

// BackendCheck is what a health check of the backend found, as the
// BackendHealth gauge shows it.
type BackendCheck uint8

// The findings of a health check of the backend.
const (
	// BackendOK is a backend that takes writes.
	BackendOK BackendCheck = iota
	// BackendUnreachable is a backend that did not answer, or answered
	// with an error other than a refusal of writes (a wrong password, say).
	BackendUnreachable
	// BackendRefusesWrites is a Redis that answers but would refuse the
	// scripts' writes: out of memory under noeviction, a read-only
	// replica, a failed background save, too few replicas.
	BackendRefusesWrites
)

// backendChecks lists every BackendCheck, in the order of their values.
var backendChecks = [...]BackendCheck{BackendOK, BackendUnreachable, BackendRefusesWrites}

// String returns the check's state label: "ok", "unreachable" or
// "refuses_writes".
func (c BackendCheck) String() string {
	switch c {
	case BackendOK:
		return "ok"
	case BackendUnreachable:
		return "unreachable"
	case BackendRefusesWrites:
		return "refuses_writes"
	}
	return fmt.Sprintf("BackendCheck(%d)", uint8(c))
}

// ObserveBackendCheck records what the last health check of the backend
// found: BackendHealth is 1 for c's state, 0 for the others.
func (m *Metrics) ObserveBackendCheck(c BackendCheck) {
	for _, s := range backendChecks {
		v := 0.0
		if s == c {
			v = 1
		}
		m.backendHealth.WithLabelValues(s.String()).Set(v)
	}
}
