// Package promtext reads the Prometheus text format as ratewarden's /metrics
// writes it, for the tests and the load generator: one sample a line, each a
// series and its value, with no timestamps.
package promtext

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Parse returns the samples of text by series, each series written as the
// format writes it: name{label="value",...}, labels in the order given.
// Blank lines and comments are skipped; any other line that is not a series
// and a number is an error.
func Parse(text string) (map[string]float64, error) {
	samples := make(map[string]float64)
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			return nil, fmt.Errorf("promtext: sample line %q: no value", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("promtext: sample line %q: %w", line, err)
		}
		samples[line[:i]] = v
	}
	return samples, nil
}

// Scrape fetches url, a /metrics endpoint, and parses what it serves.
func Scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("promtext: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("promtext: %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("promtext: %s: %s", url, resp.Status)
	}
	return Parse(string(body))
}
