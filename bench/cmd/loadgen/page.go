package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The files the report generators (bench, rediscost, overload, rlqs and
// report) write, relative to the directory they write into: the page, on
// which each generator owns one block of headline tables between its
// markers, and a folder that holds each generator's detail page and the
// JSON it renders from.
const (
	pagePath  = "BENCHMARKS.md"
	detailDir = "benchmarks"
)

// pageTitle opens a page that a generator writes into a directory without
// one.
const pageTitle = "# Benchmarks\n\n"

// marker names a block of generated or kept text by the two HTML comments
// around it: "<!-- name:begin -->" and "<!-- name:end -->".
type marker string

// The blocks of the page, one per generator, and of the detail pages, the
// analysis written by hand that a new rendering keeps.
const (
	benchMarker             marker = "bench"
	rediscostMarker         marker = "rediscost"
	overloadMarker          marker = "overload"
	rlqsMarker              marker = "rlqs"
	benchAnalysisMarker     marker = "analysis"
	rediscostAnalysisMarker marker = "rediscost-analysis"
	overloadAnalysisMarker  marker = "overload-analysis"
	rlqsAnalysisMarker      marker = "rlqs-analysis"
)

func (m marker) begin() string { return "<!-- " + string(m) + ":begin -->" }
func (m marker) end() string   { return "<!-- " + string(m) + ":end -->" }

// wrap returns body between m's comments, each on a line of its own.
func (m marker) wrap(body string) string {
	body = strings.Trim(body, "\n")
	if body != "" {
		body += "\n"
	}
	return m.begin() + "\n" + body + m.end() + "\n"
}

// kept returns what stands between m's comments in text, or "".
func (m marker) kept(text string) string {
	_, rest, ok := strings.Cut(text, m.begin())
	if !ok {
		return ""
	}
	body, _, ok := strings.Cut(rest, m.end())
	if !ok {
		return ""
	}
	return strings.Trim(body, "\n")
}

// replace returns text with m's block (its comments included) replaced by
// body between m's comments; when text has no such block, the block is
// appended after a blank line.
func (m marker) replace(text, body string) string {
	block := m.wrap(body)
	before, rest, ok := strings.Cut(text, m.begin())
	if ok {
		if _, after, ok := strings.Cut(rest, m.end()); ok {
			return before + strings.TrimSuffix(block, "\n") + after
		}
	}
	if text != "" && !strings.HasSuffix(text, "\n\n") {
		text = strings.TrimRight(text, "\n") + "\n\n"
	}
	return text + block
}

// readText returns the text of the file at path, "" when there is none.
func readText(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("loadgen: %w", err)
	}
	return string(b), nil
}

// outputFile is one file a generator writes, by its path under the
// directory it writes into.
type outputFile struct {
	path string
	data []byte
}

// generated is what one generator renders from what it measured.
type generated struct {
	// block is the generator's block of the page, analysis the block of
	// its detail page that is written by hand.
	block, analysis marker
	// data is what was measured, written as JSON to jsonPath.
	data     any
	jsonPath string
	// render writes the detail page, which goes to detailPath, and the
	// headline, given the analysis kept from the detail page there was.
	detailPath string
	render     func(detail, headline io.Writer, analysis string)
	// extra are more files rendered from data (the bench's chart).
	extra []outputFile
}

// writeGenerated writes a generator's output into dir: the JSON, the extra
// files, the detail page (with the analysis between g.analysis's markers
// kept from the one there was) and the headline between g.block's markers
// on the page, whose other blocks and text stay as they were.
func writeGenerated(dir string, g generated) error {
	js, err := json.MarshalIndent(g.data, "", "  ")
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	old, err := readText(filepath.Join(dir, g.detailPath))
	if err != nil {
		return err
	}
	var detail, headline bytes.Buffer
	g.render(&detail, &headline, g.analysis.kept(old))
	files := append([]outputFile{{g.jsonPath, append(js, '\n')}, {g.detailPath, detail.Bytes()}}, g.extra...)
	return writeOutputs(dir, g.block, headline.String(), files...)
}

// writeOutputs writes each of files into dir, then headline between m's
// comments in the page, whose other blocks and text stay as they were (a
// directory without a page gets one with a title).
func writeOutputs(dir string, m marker, headline string, files ...outputFile) error {
	for _, f := range files {
		path := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
	}
	path := filepath.Join(dir, pagePath)
	page, err := readText(path)
	if err != nil {
		return err
	}
	if page == "" {
		page = pageTitle
	}
	if err := os.WriteFile(path, []byte(m.replace(page, headline)), 0o644); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	return nil
}

// writeAnalysis writes the section of a detail page that is written by
// hand: analysis between m's comments, or a line that says so.
func (m marker) writeAnalysis(w io.Writer, analysis string) {
	if analysis == "" {
		analysis = "The analysis of this run is written here by hand; a new rendering keeps what stands between these markers."
	}
	fmt.Fprintf(w, "## Analysis\n\n%s", m.wrap(analysis))
}

// reportCommand renders the page and the detail pages again from the JSON
// files the generators keep under detailDir: the bench's, the overload
// benchmark's, the Redis cost's and the RLQS comparison's, each that is
// there.
func reportCommand(args []string, stderr io.Writer) error {
	flags := newFlagSet("report", "report [-out DIR] [-in FILE]: render "+pagePath+" and "+detailDir+"/ again from the JSON files under "+detailDir+"/", stderr)
	out := flags.String("out", "", "the directory of "+pagePath+" and "+detailDir+"/ (default: the server's module, as for -root of the other commands)")
	in := flags.String("in", "", "the bench's JSON (default: "+reportJSONPath+" under -out)")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	var err error
	if *out, err = orServerRoot(*out); err != nil {
		return err
	}
	benchJSON := *in
	if benchJSON == "" {
		benchJSON = filepath.Join(*out, reportJSONPath)
	}
	rendered := 0
	for _, g := range []struct {
		json     string
		required bool
		render   func([]byte) error
	}{
		{benchJSON, *in != "", func(b []byte) error {
			var r benchReport
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			return writeReportFiles(*out, &r, stderr)
		}},
		{filepath.Join(*out, overloadJSONPath), false, func(b []byte) error {
			var r overloadReport
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			return writeOverloadFiles(*out, &r, stderr)
		}},
		{filepath.Join(*out, rediscostJSONPath), false, func(b []byte) error {
			var r redisCostReport
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			_, err := writeRedisCostFiles(*out, &r, stderr)
			return err
		}},
		{filepath.Join(*out, rlqsJSONPath), false, func(b []byte) error {
			var r rlqsReport
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			_, err := writeRLQSFiles(*out, &r, stderr)
			return err
		}},
	} {
		b, err := os.ReadFile(g.json)
		if errors.Is(err, fs.ErrNotExist) && !g.required {
			continue
		}
		if err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
		if err := g.render(b); err != nil {
			return fmt.Errorf("loadgen: %s: %w", g.json, err)
		}
		rendered++
	}
	if rendered == 0 {
		return fmt.Errorf("loadgen: report: no JSON under %s to render from", filepath.Join(*out, detailDir))
	}
	return nil
}

// fmtSpan formats the range from lo to hi: "lo to hi", or one figure when
// both format alike.
func fmtSpan(format string, lo, hi float64) string {
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return a + " to " + b
}

// writeParagraph writes sentences as one paragraph on one line, followed by
// a blank line.
func writeParagraph(w io.Writer, sentences ...string) {
	fmt.Fprintf(w, "%s\n\n", strings.Join(sentences, " "))
}
