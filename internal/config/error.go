package config

import (
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
