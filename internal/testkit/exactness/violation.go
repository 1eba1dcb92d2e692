package exactness

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The names of the checks, in Violation.Check.
const (
	// Admitted: more hits admitted in an interval than the limit allows
	// there (CheckAdmitted).
	Admitted = "admitted"
	// Denial: a denial while the model had room (CheckDenials).
	Denial = "false denial"
	// Remain: a limit_remaining outside the model's range
	// (CheckRemaining).
	Remain = "remaining"
	// Rise: a limit_remaining that rose between two calls of one caller by
	// more than the model's could (CheckRemaining).
	Rise = "rise"
)

// Violation is one breach of a rule, with what is needed to debug it.
type Violation struct {
	// Check is Admitted, Denial, Remain or Rise.
	Check string
	Limit string
	// From and To are the interval judged: the interval counted, or the
	// times at which the server may have decided the call.
	From, To time.Time
	// Got is what the server did: the hits admitted, the remaining
	// reported, or its rise.
	Got int64
	// Low and High are what the model allows: the bound on hits admitted
	// (High), the model's room or remaining range, or its largest rise
	// (High).
	Low, High int64
	// Excess is how far Got lies outside [Low, High], the measure by which
	// Report sorts violations.
	Excess int64
	// Detail says the rule and the numbers in words.
	Detail string
	// Calls are the calls involved: those counted, or the call judged.
	Calls []Call
}

// String returns the violation: one line, then its calls, at most six
// (the first three and the last three).
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s [%s, %s] (%s): %s", v.Check, v.Limit, clock(v.From), clock(v.To), v.To.Sub(v.From).Round(time.Microsecond), v.Detail)
	calls := v.Calls
	if len(calls) > 6 {
		fmt.Fprintf(&b, "\n    %d calls, the first and last three:", len(calls))
		calls = append(append([]Call(nil), calls[:3]...), calls[len(calls)-3:]...)
	}
	for _, c := range calls {
		fmt.Fprintf(&b, "\n    %s", c)
	}
	return b.String()
}

// Report returns vs as text: how many of each check, then the worst (the
// largest Excess first) of each check, at most most of them per check.
func Report(vs []Violation, most int) string {
	if len(vs) == 0 {
		return "no violations"
	}
	byCheck := map[string][]Violation{}
	var checks []string
	for _, v := range vs {
		if byCheck[v.Check] == nil {
			checks = append(checks, v.Check)
		}
		byCheck[v.Check] = append(byCheck[v.Check], v)
	}
	sort.Strings(checks)
	var b strings.Builder
	for _, c := range checks {
		list := byCheck[c]
		sort.SliceStable(list, func(i, j int) bool { return list[i].Excess > list[j].Excess })
		var worst int64
		for _, v := range list {
			worst = max(worst, v.Excess)
		}
		fmt.Fprintf(&b, "%d %s violations (worst by %d):\n", len(list), c, worst)
		for i, v := range list {
			if i == most {
				fmt.Fprintf(&b, "  … and %d more\n", len(list)-most)
				break
			}
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	return b.String()
}

// Count returns how many of vs are of check.
func Count(vs []Violation, check string) int {
	n := 0
	for _, v := range vs {
		if v.Check == check {
			n++
		}
	}
	return n
}

// Worst returns the largest Excess of vs's violations of check, 0 when
// there is none.
func Worst(vs []Violation, check string) int64 {
	var w int64
	for _, v := range vs {
		if v.Check == check {
			w = max(w, v.Excess)
		}
	}
	return w
}
