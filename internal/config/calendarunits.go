package config

import (
	"fmt"
	"strings"
)

// CalendarUnits is a set of the units whose windows may follow the
// calendar: Day, Week, Month and Year (the calendar field of a limit). The
// zero value is the empty set.
type CalendarUnits uint8

// Has reports whether u is in the set.
func (c CalendarUnits) Has(u Unit) bool { return u >= Second && u <= Year && c&(1<<u) != 0 }

// UnmarshalText reads a comma-separated list of units, in any case:
// "month", or "day,week,month,year". Empty text is the empty set; a unit
// that cannot follow the calendar is an error.
func (c *CalendarUnits) UnmarshalText(text []byte) error {
	var set CalendarUnits
	for name := range strings.SplitSeq(string(text), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		u, ok := parseUnit(name)
		if !ok || !u.calendar() {
			return fmt.Errorf("%q is not a unit of calendar windows: want day, week, month or year", name)
		}
		set |= 1 << u
	}
	*c = set
	return nil
}

// String lists the set as UnmarshalText reads it, shortest unit first.
func (c CalendarUnits) String() string {
	var names []string
	for u := Day; u <= Year; u++ {
		if c.Has(u) {
			names = append(names, u.String())
		}
	}
	return strings.Join(names, ",")
}

// calendar reports whether a window of one u may follow the calendar.
func (u Unit) calendar() bool { return u == Day || u == Week || u == Month || u == Year }
