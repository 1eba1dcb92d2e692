// Package option is how a package says which of its Options is not valid.
// Each package that takes Options has DefaultOptions, which returns them
// with its defaults, and Options.Validate, whose error names the field at
// fault with an *Error. Whoever set that field can then name it in its own
// words: the settings name the environment variable it was read from.
package option

import (
	"errors"
	"fmt"
)

// Error is an option that is not valid: the name of its field in its
// package's Options (Time, Bounds.MaxHits) and what is wrong with its value.
type Error struct {
	Field   string
	Problem string
}

// Errorf returns an *Error for field whose problem is format, formatted
// with args as fmt.Sprintf does: "must be positive, not 0s".
func Errorf(field, format string, args ...any) error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Error returns the field followed by its problem.
func (e *Error) Error() string { return e.Field + " " + e.Problem }

// Of returns the *Error in err's chain, or nil.
func Of(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
