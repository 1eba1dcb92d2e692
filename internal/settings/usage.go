package settings

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"
)

// PrintUsage writes every environment variable with its default and meaning,
// as `server -h` shows them.
func PrintUsage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	format := "{{range .}}{{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}"
	if err := envconfig.Usagef(Prefix, &Settings{}, tw, format); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return tw.Flush()
}
