package algorithms

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func utc(y int, m time.Month, d, h, min, s int) time.Time {
	return time.Date(y, m, d, h, min, s, 0, time.UTC)
}

// TestCalendarWindows: a calendar limit counts in the UTC day, ISO week,
// month or year that holds the time, and its resets end at that window's
// end, whatever the window's length.
func TestCalendarWindows(t *testing.T) {
	for _, c := range []struct {
		name   string
		window time.Duration
		at     time.Time
		end    time.Time
	}{
		{"day", calendarDay, utc(2026, 11, 26, 15, 30, 0), utc(2026, 11, 27, 0, 0, 0)},
		{"week from a Thursday", calendarWeek, utc(2026, 11, 26, 15, 30, 0), utc(2026, 11, 30, 0, 0, 0)},
		{"week from a Monday", calendarWeek, utc(2026, 11, 30, 0, 0, 0), utc(2026, 12, 7, 0, 0, 0)},
		{"week across a year", calendarWeek, utc(2026, 12, 31, 8, 0, 0), utc(2027, 1, 4, 0, 0, 0)},
		{"January", calendarMonth, utc(2026, 1, 31, 23, 0, 0), utc(2026, 2, 1, 0, 0, 0)},
		{"February of a leap year", calendarMonth, utc(2028, 2, 28, 12, 0, 0), utc(2028, 3, 1, 0, 0, 0)},
		{"February of 2100", calendarMonth, utc(2100, 2, 28, 12, 0, 0), utc(2100, 3, 1, 0, 0, 0)},
		{"December", calendarMonth, utc(2026, 12, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0)},
		{"a year", calendarYear, utc(2026, 12, 31, 23, 59, 59), utc(2027, 1, 1, 0, 0, 0)},
		{"a leap year", calendarYear, utc(2028, 1, 1, 0, 0, 0), utc(2029, 1, 1, 0, 0, 0)},
		{"before the epoch", calendarMonth, utc(1969, 12, 15, 0, 0, 0), utc(1970, 1, 1, 0, 0, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := Limit{Algorithm: FixedWindow, Requests: 2, Window: c.window, Calendar: true}
			require.NoError(t, l.Validate())
			var s FixedWindowState
			res := s.Take(l, c.at, 1)
			assert.True(t, res.Allowed)
			assert.Equal(t, c.end.Sub(c.at), res.ResetAfter, "admitted: replenished at the window's end")
			s.Take(l, c.at, 1)
			res = s.Take(l, c.at, 1)
			assert.False(t, res.Allowed)
			assert.Equal(t, c.end.Sub(c.at), res.ResetAfter, "denied: admitted again at the window's end")
			assert.True(t, c.end.Equal(s.Expiry(l)), "the state lasts to the end of its window, not %s", s.Expiry(l))
			assert.False(t, s.Take(l, c.end.Add(-time.Microsecond), 1).Allowed, "a microsecond before the end")
			assert.True(t, s.Take(l, c.end, 2).Allowed, "the next window starts empty")
		})
	}
}

// TestCalendarDebts: charges owed past a calendar month are paid off at L a
// month, each month whatever its length.
func TestCalendarDebts(t *testing.T) {
	l := Limit{Algorithm: FixedWindow, Requests: 2, Window: calendarMonth, Calendar: true}
	var s FixedWindowState
	at := utc(2027, 1, 20, 0, 0, 0)
	res := s.Charge(l, at, 5)
	assert.False(t, res.Allowed)
	// January holds 5 of 2, owing 3: February starts at 3, March at 1.
	assert.Equal(t, utc(2027, 3, 1, 0, 0, 0).Sub(at), res.ResetAfter)
	assert.False(t, s.Take(l, utc(2027, 2, 28, 23, 59, 59), 0).Allowed, "February still owes")
	res = s.Take(l, utc(2027, 3, 1, 0, 0, 0), 1)
	assert.True(t, res.Allowed, "March starts at 1")
	assert.Zero(t, res.Remaining)
	assert.Equal(t, 31*24*time.Hour, res.ResetAfter, "replenished at the end of March")
}

// TestCalendarLimitsValidate: only a fixed window counts in the calendar,
// and only in a day, week, month or year; a calendar limit has a state of
// its own, and lives as long as its longest window.
func TestCalendarLimitsValidate(t *testing.T) {
	month := Limit{Algorithm: FixedWindow, Requests: 10, Window: calendarMonth, Calendar: true}
	require.NoError(t, month.Validate())
	assert.Equal(t, 31*calendarDay, month.Lifetime())
	assert.Equal(t, 366*calendarDay, Limit{Algorithm: FixedWindow, Requests: 1, Window: calendarYear, Calendar: true}.Lifetime())
	assert.Equal(t, uint64(10*(3650/31)), month.MaxDebt(), "every debt is paid within ten years of the longest months")
	assert.Equal(t, "month", month.CalendarUnit())

	sliding := month
	sliding.Algorithm = SlidingWindowCounter
	assert.ErrorIs(t, sliding.Validate(), ErrInvalidLimit)
	assert.ErrorContains(t, sliding.Validate(), "calendar windows apply only to fixed_window")
	twoDays := month
	twoDays.Window = 2 * calendarDay
	assert.ErrorContains(t, twoDays.Validate(), "a day, a week, a month or a year")

	plain := month
	plain.Calendar = false
	assert.Empty(t, plain.CalendarUnit())
}
