package settings

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// compatContext is what a conversion sees: their variables, the Settings
// so far, and the RLS_ variables it may give values to.
type compatContext struct {
	lookup func(string) (string, bool)
	s      *Settings
	// vars are the RLS_ variables of s, by name.
	vars   map[string]variable
	v      *compatVar
	report *CompatReport
	// err is the first value a setting refused (see assign).
	err error
}

// get returns the value of their variable name, and whether it is set.
func (c *compatContext) get(name string) (string, bool) { return c.lookup(name) }

// isSet reports whether any of their variables is set.
func (c *compatContext) isSet(names ...string) bool {
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
func (c *compatContext) set(ours, text string) {
	c.setFrom(c.setNames(), ours, text)
}

// setFrom is set for a value that comes from the variables from alone.
func (c *compatContext) setFrom(from []string, ours, text string) {
	c.assign(from, ours, text, text)
}

// assign is setFrom with shown, the value as the report shows it (the
// headers without their values); a password is shown redacted. A value the
// setting refuses is kept in c.err, with the variables it came from.
func (c *compatContext) assign(from []string, ours, text, shown string) {
	if _, explicit := c.lookup(ours); explicit {
		c.report.Overridden = append(c.report.Overridden, CompatNote{Theirs: from, Ours: ours})
		return
	}
	var err error
	if v, ok := c.vars[ours]; !ok {
		err = fmt.Errorf("server: compatVars names %s, which is no setting", ours)
	} else if err = v.set(text); err != nil {
		err = fmt.Errorf("%w (envoyproxy/ratelimit's variables set %s from %s)", err, ours, strings.Join(from, ","))
	}
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		return
	}
	if strings.HasSuffix(ours, "_PASSWORD") {
		shown = "[redacted]"
	}
	c.report.Applied = append(c.report.Applied, CompatNote{Theirs: from, Ours: ours, Value: shown})
}

// ignore reports their variables that are set as not read, with why.
func (c *compatContext) ignore(why string, names ...string) {
	if set := c.setNames(names...); len(set) > 0 {
		c.report.Ignored = append(c.report.Ignored, CompatNote{Theirs: set, Why: why})
	}
}

// builtIn reports their variables that are set as needing no setting.
func (c *compatContext) builtIn(why string, names ...string) {
	if set := c.setNames(names...); len(set) > 0 {
		c.report.BuiltIn = append(c.report.BuiltIn, CompatNote{Theirs: set, Why: why})
	}
}

// setNames returns those of names (by default the row's variables) that
// are set.
func (c *compatContext) setNames(names ...string) []string {
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
func (c *compatContext) theirBool(name string) (bool, error) {
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

func refuseIfSet(c *compatContext) error {
	for _, name := range c.v.theirs {
		if v, ok := c.get(name); ok && v != "" {
			return fmt.Errorf("%s is set, and %s; unset it", name, c.v.note)
		}
	}
	return nil
}

func ignoreIfSet(c *compatContext) error {
	c.ignore(c.v.note)
	return nil
}

func builtInIfSet(c *compatContext) error {
	c.builtIn(c.v.note)
	return nil
}

func sameString(c *compatContext) error {
	c.copyString(c.v.theirs[0], c.v.ours[0])
	return nil
}

func sameBool(c *compatContext) error { return c.copyBool(c.v.theirs[0], c.v.ours[0]) }

func sameInt(c *compatContext) error {
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

func sameDuration(c *compatContext) error {
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

func sameFloat(c *compatContext) error {
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
func (c *compatContext) copyString(theirs, ours string) {
	if v, ok := c.get(theirs); ok {
		c.setFrom([]string{theirs}, ours, v)
	}
}

// copyBool gives ours the boolean theirs, when it is set.
func (c *compatContext) copyBool(theirs, ours string) error {
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
func hostPort(hostVar, portVar, defaultPort, ours string) func(*compatContext) error {
	return func(c *compatContext) error {
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
