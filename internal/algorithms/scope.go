package algorithms

import (
	"context"
	"sync"
)

// Scope groups the calls that one request makes to a Limiter (its take, and
// the refund of what a denied request took), so that a layer of the request
// path can hold something for the whole request rather than for one call:
// the admission gate keeps a request's slot from its first call until the
// request ends. The caller makes a Scope with WithScope, makes its calls
// one after the other with the context it returned, and ends it with End.
// It is safe for concurrent use.
type Scope struct {
	mu    sync.Mutex
	ended bool
	held  []Releaser
	first [1]Releaser // room for the usual single hold
}

// Releaser is something a layer holds for a Scope until it ends: a slot of
// the admission gate. Two Releasers are the same hold when they are equal.
type Releaser interface {
	// Release gives the hold back.
	Release()
}

// scopeKey keys a Scope in a context.
type scopeKey struct{}

// scopeContext is a context that carries a Scope, made in one allocation.
type scopeContext struct {
	context.Context
	scope Scope
}

// Value returns the Scope for scopeKey, and the parent's values otherwise.
func (c *scopeContext) Value(key any) any {
	if key == (scopeKey{}) {
		return &c.scope
	}
	return c.Context.Value(key)
}

// WithScope returns a copy of ctx that carries a new Scope, and that Scope:
// the calls made with ctx, or with a context derived from it, are the
// calls of one request until the Scope ends.
func WithScope(ctx context.Context) (context.Context, *Scope) {
	c := &scopeContext{Context: ctx}
	return c, &c.scope
}

// ScopeOf returns the Scope that ctx carries, or nil when it carries none: a
// call without a scope is a request of its own.
func ScopeOf(ctx context.Context) *Scope {
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	return s
}

// Holds reports whether s holds r. A nil Scope holds nothing.
func (s *Scope) Holds(r Releaser) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.held {
		if h == r {
			return true
		}
	}
	return false
}

// Hold makes s hold r until it ends, when End releases it, and reports true;
// it reports false, holding nothing, when s is nil or has ended already:
// the caller then releases r itself once its call is done.
func (s *Scope) Hold(r Releaser) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	if s.held == nil {
		s.held = s.first[:0]
	}
	s.held = append(s.held, r)
	return true
}

// End ends the scope, releasing what it holds, last held first. It is
// called once, after the request's last call.
func (s *Scope) End() {
	s.mu.Lock()
	held := s.held
	s.held, s.ended = nil, true
	s.mu.Unlock()
	for i := len(held) - 1; i >= 0; i-- {
		held[i].Release()
	}
}
