package config

import (
	"errors"
	"strconv"
	"strings"
)

// Error is a configuration error: what is wrong, and where. Every error that
// Parse and LoadContext report about a file is an *Error; find it with errors.As.
// It prints as "file:line:column: field: message", leaving out the line and
// the column when they are unknown (0), and the field when the error
// concerns the whole file.
type Error struct {
	// File is the name of the file, as given to Parse or found by LoadContext, or
	// the resource, as FromRateLimitConfigs names it.
	File string
	// Line is the 1-based line of the offending YAML node, 0 when unknown.
	Line int
	// Column is the 1-based column of the offending YAML node, 0 when
	// unknown: the YAML parser's own errors give only a line.
	Column int
	// Field is the path of the offending field, such as
	// "descriptors[0].rate_limit.unit"; empty for the file as a whole.
	Field string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying cause, if any: an *fs.PathError, an error
	// wrapping algorithms.ErrInvalidLimit, or one wrapping ErrNoConfig.
	Err error
}

// Error returns the error as "file:line:column: field: message".
func (e *Error) Error() string {
	var b strings.Builder
	writePosition(&b, e.File, e.Line, e.Column, e.Field)
	b.WriteString(e.Msg)
	return b.String()
}

// writePosition writes "file:line:column: field: ", leaving out the line
// and the column when line is 0, the column when it is 0, and the field
// when it is empty.
func writePosition(b *strings.Builder, file string, line, column int, field string) {
	b.WriteString(file)
	if line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(line))
		if column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(column))
		}
	}
	b.WriteString(": ")
	if field != "" {
		b.WriteString(field)
		b.WriteString(": ")
	}
}

// Unwrap returns the underlying cause, or nil.
func (e *Error) Unwrap() error { return e.Err }

// Errors are the errors of a load that found several: every error Parse
// could go on past, in the order of the files and of their lines. It prints
// as its errors, one per line.
type Errors []*Error

// Error returns the errors, one per line.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors, for errors.Is and errors.As, which find the
// first that matches.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// ErrorsOf returns the configuration errors that err holds: the Errors it
// wraps, or the one *Error it wraps, or none.
func ErrorsOf(err error) []*Error {
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return nil
}

// errorOf returns nil for no errors, the *Error for one, and Errors for
// several.
func errorOf(es []*Error) error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return Errors(es)
}
