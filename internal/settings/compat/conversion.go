package compat

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// conversion is what the conversion of one row sees: the variables that
// lookup finds, theirs and ours, and the target, whose RLS_ variables it
// may give values to, and whose values so far it may read.
type conversion struct {
	lookup func(string) (string, bool)
	target Target
	v      *row
	report *Report
	// err is the first value a setting refused (see assign).
	err error
}

// get returns the value of their variable name, and whether it is set.
func (c *conversion) get(name string) (string, bool) { return c.lookup(name) }

// isSet reports whether any of their variables is set.
func (c *conversion) isSet(names ...string) bool {
	for _, n := range names {
		if _, ok := c.lookup(n); ok {
			return true
		}
	}
	return false
}

// set gives the RLS_ variable ours the value text, which its setting's own
// type parses, unless ours is set in the environment: then the explicit
// value wins, and the report says so. The report names the row's variables
// that are set as the source.
func (c *conversion) set(ours, text string) {
	c.setFrom(c.setNames(), ours, text)
}

// setFrom is set for a value that comes from the variables from alone.
func (c *conversion) setFrom(from []string, ours, text string) {
	c.assign(from, ours, text, text)
}

// assign is setFrom with shown, the value as the report shows it (the
// headers without their values); a password is shown redacted. A value the
// setting refuses is kept in c.err, with the variables it came from.
func (c *conversion) assign(from []string, ours, text, shown string) {
	if _, explicit := c.lookup(ours); explicit {
		c.report.Overridden = append(c.report.Overridden, Note{Theirs: from, Ours: ours})
		return
	}
	if err := c.target.Set(ours, text); err != nil {
		if c.err == nil {
			c.err = fmt.Errorf("%w (envoyproxy/ratelimit's variables set %s from %s)", err, ours, strings.Join(from, ","))
		}
		return
	}
	if strings.HasSuffix(ours, "_PASSWORD") {
		shown = "[redacted]"
	}
	c.report.Applied = append(c.report.Applied, Note{Theirs: from, Ours: ours, Value: shown})
}

// ignore reports their variables that are set as not read, with why.
func (c *conversion) ignore(why string, names ...string) {
	if set := c.setNames(names...); len(set) > 0 {
		c.report.Ignored = append(c.report.Ignored, Note{Theirs: set, Why: why})
	}
}

// builtIn reports their variables that are set as needing no setting.
func (c *conversion) builtIn(why string, names ...string) {
	if set := c.setNames(names...); len(set) > 0 {
		c.report.BuiltIn = append(c.report.BuiltIn, Note{Theirs: set, Why: why})
	}
}

// setNames returns those of names (by default the row's variables) that
// are set.
func (c *conversion) setNames(names ...string) []string {
	if len(names) == 0 {
		names = c.v.theirs
	}
	var set []string
	for _, n := range names {
		if _, ok := c.lookup(n); ok {
			set = append(set, n)
		}
	}
	return set
}

// parseTheirBool parses a boolean as envoyproxy/ratelimit's envconfig
// does.
func parseTheirBool(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s %q is not true or false", name, v)
	}
	return b, nil
}

// theirBool returns their boolean variable name, false when unset.
func (c *conversion) theirBool(name string) (bool, error) {
	v, ok := c.get(name)
	if !ok {
		return false, nil
	}
	return parseTheirBool(name, v)
}

// The conversions of the rows that need no more than one of these: the
// row's variables that are set are refused, ignored or built in; or, with
// same*, its one variable gives its one RLS_ variable its value, checked as
// envoyproxy/ratelimit reads it.

func refuseIfSet(c *conversion) error {
	for _, name := range c.v.theirs {
		if v, ok := c.get(name); ok && v != "" {
			return fmt.Errorf("%s is set, and %s; unset it", name, c.v.note)
		}
	}
	return nil
}

func ignoreIfSet(c *conversion) error {
	c.ignore(c.v.note)
	return nil
}

func builtInIfSet(c *conversion) error {
	c.builtIn(c.v.note)
	return nil
}

func sameString(c *conversion) error {
	c.copyString(c.v.theirs[0], c.v.ours[0])
	return nil
}

func sameBool(c *conversion) error { return c.copyBool(c.v.theirs[0], c.v.ours[0]) }

func sameInt(c *conversion) error {
	theirs, ours := c.v.theirs[0], c.v.ours[0]
	v, ok := c.get(theirs)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%s %q is not a whole number", theirs, v)
	}
	c.assign([]string{theirs}, ours, strconv.Itoa(n), v)
	return nil
}

func sameDuration(c *conversion) error {
	theirs, ours := c.v.theirs[0], c.v.ours[0]
	v, ok := c.get(theirs)
	if !ok {
		return nil
	}
	if d, err := time.ParseDuration(v); err != nil || d < 0 {
		return fmt.Errorf("%s %q is not a duration such as 50ms or 2s", theirs, v)
	}
	c.setFrom([]string{theirs}, ours, v)
	return nil
}

func sameFloat(c *conversion) error {
	theirs, ours := c.v.theirs[0], c.v.ours[0]
	v, ok := c.get(theirs)
	if !ok {
		return nil
	}
	if _, err := strconv.ParseFloat(v, 64); err != nil {
		return fmt.Errorf("%s %q is not a number", theirs, v)
	}
	c.setFrom([]string{theirs}, ours, v)
	return nil
}

// copyString gives ours the value of theirs, when it is set.
func (c *conversion) copyString(theirs, ours string) {
	if v, ok := c.get(theirs); ok {
		c.setFrom([]string{theirs}, ours, v)
	}
}

// copyBool gives ours the boolean theirs, when it is set.
func (c *conversion) copyBool(theirs, ours string) error {
	v, ok := c.get(theirs)
	if !ok {
		return nil
	}
	b, err := parseTheirBool(theirs, v)
	if err != nil {
		return err
	}
	c.setFrom([]string{theirs}, ours, strconv.FormatBool(b))
	return nil
}

// hostPort returns the conversion of a host variable and a port variable
// into the address ours, with defaultPort when only the host is set.
func hostPort(hostVar, portVar, defaultPort, ours string) func(*conversion) error {
	return func(c *conversion) error {
		host, hostSet := c.get(hostVar)
		port, portSet := c.get(portVar)
		if !hostSet && !portSet {
			return nil
		}
		if !portSet {
			port = defaultPort
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("%s %q is not a port number", portVar, port)
		}
		c.set(ours, net.JoinHostPort(host, port))
		return nil
	}
}
