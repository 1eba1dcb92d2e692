package algorithms

import "time"

// The lengths of the windows that may follow the calendar (Limit.Calendar),
// as Limit.Window gives them: a UTC day, an ISO week (from Monday), a
// calendar month and a calendar year. A day from the epoch already is a UTC
// day, and the other three are named by their nominal lengths, those of
// Envoy's units (a month of 30 days, a year of 365).
const (
	calendarDay   = 24 * time.Hour
	calendarWeek  = 7 * calendarDay
	calendarMonth = 30 * calendarDay
	calendarYear  = 365 * calendarDay
)

// mondayMicros is the first Monday after the epoch, 1970-01-05, in µs: ISO
// weeks start there.
const mondayMicros = 4 * int64(calendarDay/time.Microsecond)

// windows numbers the windows of a fixed_window limit: windows of W
// microseconds from the epoch, or, for a calendar limit, the UTC days, ISO
// weeks, months or years. Window i starts at start(i), and the window
// holding t is index(t). The zero value is not usable.
type windows struct {
	w int64 // W in µs, the nominal length for a calendar limit
	// cal is calendarWeek, calendarMonth or calendarYear for a calendar
	// limit of that length, and 0 for windows of W from the epoch (which a
	// calendar day is).
	cal time.Duration
}

// windows returns how l numbers its windows.
func (l Limit) windows() windows {
	x := windows{w: l.WindowMicros()}
	if l.Calendar && l.Window != calendarDay {
		x.cal = l.Window
	}
	return x
}

// index returns the window holding t µs.
func (x windows) index(t int64) int64 {
	switch x.cal {
	case calendarWeek:
		return floorDiv(t-mondayMicros, x.w)
	case calendarMonth:
		d := time.UnixMicro(t).UTC()
		return int64(d.Year()-1970)*12 + int64(d.Month()-1)
	case calendarYear:
		return int64(time.UnixMicro(t).UTC().Year() - 1970)
	}
	return floorDiv(t, x.w)
}

// start returns when window i starts, in µs.
func (x windows) start(i int64) int64 {
	switch x.cal {
	case calendarWeek:
		return i*x.w + mondayMicros
	case calendarMonth:
		return time.Date(1970+int(floorDiv(i, 12)), time.Month(i-12*floorDiv(i, 12)+1), 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	case calendarYear:
		return time.Date(1970+int(i), time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	}
	return i * x.w
}

// longest returns the longest window: 31 days for a calendar month, 366
// for a calendar year, W otherwise.
func (x windows) longest() time.Duration {
	switch x.cal {
	case calendarMonth:
		return 31 * calendarDay
	case calendarYear:
		return 366 * calendarDay
	}
	return time.Duration(x.w) * time.Microsecond
}

// CalendarUnit returns the calendar window of a calendar limit, "day",
// "week", "month" or "year", and "" for any other limit.
func (l Limit) CalendarUnit() string {
	if !l.Calendar {
		return ""
	}
	switch l.Window {
	case calendarDay:
		return "day"
	case calendarWeek:
		return "week"
	case calendarMonth:
		return "month"
	case calendarYear:
		return "year"
	}
	return ""
}

// WindowIndex returns the index of the window of a fixed_window limit l that
// holds now: ⌊now/W⌋ for windows from the epoch, or the number of the UTC
// day, ISO week, month or year of a calendar limit. l must be valid.
func (l Limit) WindowIndex(now time.Time) int64 { return l.windows().index(now.UnixMicro()) }

// WindowStart returns when window i of a fixed_window limit l starts (see
// WindowIndex). l must be valid.
func (l Limit) WindowStart(i int64) time.Time { return time.UnixMicro(l.windows().start(i)) }
