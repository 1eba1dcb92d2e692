package settings

import (
	"encoding"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// PrintUsage writes every environment variable with its default and meaning,
// as `server -h` shows them.
func PrintUsage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	d := Default()
	o := defaultOptions()
	bound := map[uintptr]bool{}
	for _, b := range d.bindings(&o) {
		bound[reflect.ValueOf(b.setting).Pointer()] = true
	}
	for _, v := range variables(Prefix, reflect.ValueOf(&d)) {
		// A default of the tags as they say it; a package's as its
		// type writes it, zero or not when it sets an option, and only
		// when not zero otherwise (an empty Redis password is no default).
		text, ok := v.tag.Lookup("default")
		if !ok && (bound[v.field.Addr().Pointer()] || !v.field.IsZero()) {
			text = format(v.field)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.name, text, v.tag.Get("desc"))
	}
	return tw.Flush()
}

// format returns the text of a default as a variable would say it: the
// way its type writes itself, a duration in its shortest units (1488h, not
// 1488h0m0s).
func format(field reflect.Value) string {
	if m, ok := field.Interface().(encoding.TextMarshaler); ok {
		text, err := m.MarshalText()
		if err != nil {
			panic(fmt.Sprintf("settings: a default does not write itself: %v", err))
		}
		return string(text)
	}
	switch v := field.Interface().(type) {
	case time.Duration:
		s := v.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []string:
		return strings.Join(v, ",")
	}
	return fmt.Sprint(field.Interface())
}
