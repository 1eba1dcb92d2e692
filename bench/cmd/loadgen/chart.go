package main

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// The chart's geometry, in SVG user units.
const (
	chartWidth   = 980
	chartHeight  = 440
	panelWidth   = 400
	panelHeight  = 300
	panelTop     = 80
	panelLeft1   = 80
	panelLeft2   = 560
	tickLength   = 5
	chartFont    = "font-family=\"sans-serif\" font-size=\"12\""
	gridColor    = "#dddddd"
	axisColor    = "#333333"
	legendTop    = 30
	legendStride = 150
)

// seriesStyle is the colour and dash of a series, by name; others are grey.
var seriesStyle = map[string]struct{ color, dash string }{
	"no-op":           {"#555555", "6 4"},
	backendMemory:     {"#1b9e77", ""},
	backendStandalone: {"#d95f02", ""},
	backendCluster:    {"#7570b3", ""},
	"raw EVALSHA":     {"#e7298a", "2 3"},
}

// writeChart writes an SVG of two line charts side by side: decisions per
// second against concurrency (linear y) and p99 latency against concurrency
// (logarithmic y), concurrency on a log₂ axis, with a legend.
func writeChart(w io.Writer, lines []series) error {
	var xs []float64
	maxRate, minP99, maxP99 := 0.0, math.Inf(1), 0.0
	for _, s := range lines {
		for _, pt := range s.Points {
			xs = append(xs, math.Log2(float64(pt.Concurrency)))
			maxRate = max(maxRate, pt.Rate)
			if pt.P99 > 0 {
				minP99, maxP99 = min(minP99, pt.P99), max(maxP99, pt.P99)
			}
		}
	}
	if len(xs) == 0 {
		return errors.New("loadgen: chart: no points")
	}
	x0, x1 := xs[0], xs[0]
	for _, x := range xs {
		x0, x1 = min(x0, x), max(x1, x)
	}
	if x0 == x1 {
		x0, x1 = x0-1, x1+1
	}
	if maxP99 == 0 {
		minP99, maxP99 = 1, 10
	}
	rateStep := niceStep(maxRate / 5)
	rateTop := math.Ceil(maxRate/rateStep) * rateStep
	if rateTop == 0 {
		rateTop = 1
	}
	// Latency in milliseconds, on whole decades.
	d0 := math.Floor(math.Log10(minP99 / 1000))
	d1 := math.Ceil(math.Log10(maxP99 / 1000))
	if d0 == d1 {
		d1++
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight, chartFont)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartWidth, chartHeight)

	xAt := func(left float64, c float64) float64 {
		return left + (math.Log2(c)-x0)/(x1-x0)*panelWidth
	}
	rateY := func(v float64) float64 { return panelTop + panelHeight - v/rateTop*panelHeight }
	p99Y := func(us float64) float64 {
		return panelTop + panelHeight - (math.Log10(us/1000)-d0)/(d1-d0)*panelHeight
	}

	// The panels' frames, grids and axes.
	for _, left := range []float64{panelLeft1, panelLeft2} {
		for e := math.Ceil(x0); e <= x1; e++ {
			x := xAt(left, math.Exp2(e))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, panelTop, x, panelTop+panelHeight, gridColor)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", x, panelTop+panelHeight+tickLength+13, math.Exp2(e))
		}
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", left, panelTop, panelWidth, panelHeight, axisColor)
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">concurrent callers (log scale)</text>`+"\n", left+panelWidth/2, panelTop+panelHeight+40)
	}
	for v := 0.0; v <= rateTop+rateStep/2; v += rateStep {
		y := rateY(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", panelLeft1, y, panelLeft1+panelWidth, y, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", panelLeft1-tickLength-2, y+4, fmtRate(v))
	}
	for d := d0; d <= d1; d++ {
		y := p99Y(math.Pow(10, d) * 1000)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", panelLeft2, y, panelLeft2+panelWidth, y, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", panelLeft2-tickLength-2, y+4, fmtMillis(math.Pow(10, d)))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">decisions per second</text>`+"\n",
		18, panelTop+panelHeight/2, 18, panelTop+panelHeight/2)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">p99 latency (ms, log scale)</text>`+"\n",
		panelLeft2-58, panelTop+panelHeight/2, panelLeft2-58, panelTop+panelHeight/2)

	// The lines, with a dot at each measured point.
	for _, s := range lines {
		st, ok := seriesStyle[s.Name]
		if !ok {
			st.color = "#999999"
		}
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		var ratePts, p99Pts []string
		for _, pt := range s.Points {
			c := float64(pt.Concurrency)
			ratePts = append(ratePts, fmt.Sprintf("%.1f,%.1f", xAt(panelLeft1, c), rateY(pt.Rate)))
			if pt.P99 > 0 {
				p99Pts = append(p99Pts, fmt.Sprintf("%.1f,%.1f", xAt(panelLeft2, c), p99Y(pt.P99)))
			}
		}
		for _, pts := range [][]string{ratePts, p99Pts} {
			if len(pts) == 0 {
				continue
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), st.color, dash)
			for _, xy := range pts {
				x, y, _ := strings.Cut(xy, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", x, y, st.color)
			}
		}
	}

	// The legend, one entry per series, in a row above the panels.
	for i, s := range lines {
		st, ok := seriesStyle[s.Name]
		if !ok {
			st.color = "#999999"
		}
		x := panelLeft1 + i*legendStride
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x, legendTop, x+28, legendTop, st.color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+34, legendTop+4, html.EscapeString(s.Name))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="bold">decisions per second</text>`+"\n", panelLeft1+panelWidth/2, panelTop-8)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="bold">p99 latency</text>`+"\n", panelLeft2+panelWidth/2, panelTop-8)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceStep returns the step of 1, 2 or 5 times a power of ten nearest above
// raw.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// fmtMillis formats a decade of milliseconds.
func fmtMillis(ms float64) string {
	if ms >= 1 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return strings.TrimRight(fmt.Sprintf("%.3f", ms), "0") + " ms"
}
