package exactness

import (
	"maps"
	"sort"
	"sync"
	"time"
)

// Recorder records calls and events into a History. It is safe for
// concurrent use; the zero value is not usable, NewRecorder makes one.
type Recorder struct {
	mu      sync.Mutex
	limits  map[string]Limit
	current map[string]Limit
	calls   []Call
	reloads []Reload
	losses  []Loss
}

// NewRecorder returns a Recorder of calls against limits, keyed by the
// names calls give in Call.Limit.
func NewRecorder(limits map[string]Limit) *Recorder {
	return &Recorder{limits: maps.Clone(limits), current: maps.Clone(limits)}
}

// Add records c.
func (r *Recorder) Add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// Reload records that the limit named limit became to: on no replica
// before before, and on every replica for calls sent after after.
func (r *Recorder) Reload(limit string, to Limit, before, after time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloads = append(r.reloads, Reload{Limit: limit, To: to, Before: before, After: after})
	r.current[limit] = to
}

// Limit returns the limit named name as the last Reload left it.
func (r *Recorder) Limit(name string) Limit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current[name]
}

// Loss records that the backend forgot every state between before and
// after.
func (r *Recorder) Loss(before, after time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.losses = append(r.losses, Loss{Before: before, After: after})
}

// Len returns how many calls were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// History returns a copy of what was recorded, the calls by send time.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := History{
		Limits:  maps.Clone(r.limits),
		Calls:   append([]Call(nil), r.calls...),
		Reloads: append([]Reload(nil), r.reloads...),
		Losses:  append([]Loss(nil), r.losses...),
	}
	sort.SliceStable(h.Calls, func(i, j int) bool { return h.Calls[i].Sent.Before(h.Calls[j].Sent) })
	return h
}
