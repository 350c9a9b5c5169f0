// Package snapshot draws a Grafana dashboard as a PNG from Prometheus's answers to its
// panels' queries over a window of time: the picture a person would see in Grafana, without
// running Grafana. It lays the panels out by their grid positions, draws each time-series
// panel as lines with a legend below them, each stat panel as its last value over a faint
// area of the window, and each row as a heading. e2e scenario 20 takes one while a broker
// is dead (make dashboard-snapshot writes it to docs/images/, where README "Monitoring"
// shows it).
package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/paddock-dev/paddock/internal/monitoring"
)

// Sample is one value of a series at one time.
type Sample struct {
	T time.Time
	V float64
}

// Series is one series of a range query's answer.
type Series struct {
	Labels  map[string]string
	Samples []Sample
}

// RangeQuery answers a PromQL expression at every step of [start, end], as Prometheus's
// /api/v1/query_range does (Prometheus gives one).
type RangeQuery func(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error)

// Mark is a moment of the window drawn as a dashed line across every time-series panel,
// labelled: what was done to the system, and when.
type Mark struct {
	At    time.Time
	Label string
}

// Options says what to draw.
type Options struct {
	Title      string // the picture's heading; the window is written beside it
	Start, End time.Time
	Step       time.Duration     // the range queries' resolution
	Vars       map[string]string // the dashboard variables' values (monitoring.Expand)
	Marks      []Mark
	Width      vg.Length // the picture's width in points; DefaultWidth when zero
}

// PanelReport says what a panel showed: how many series and samples its queries returned.
// A panel with none is drawn with "No data", as Grafana does, and its report says so.
type PanelReport struct {
	Title, Type     string
	Series, Samples int
}

const (
	// DefaultWidth is the picture's width in points (it is drawn at dpi, so 1.5 pixels per point).
	DefaultWidth vg.Length = 1200
	dpi                    = 108
	gridColumns            = 24
	unitHeight   vg.Length = 30 // one grid unit of height, as Grafana's (30 px)
	headerHeight vg.Length = 34
	gap          vg.Length = 4 // between panels
	legendLines            = 3 // legend lines below a time-series panel at most
)

var (
	background = color.RGBA{R: 0xf4, G: 0xf5, B: 0xf5, A: 0xff}
	panelFill  = color.White
	panelEdge  = color.RGBA{R: 0xd8, G: 0xd9, B: 0xda, A: 0xff}
	ink        = color.RGBA{R: 0x24, G: 0x29, B: 0x2e, A: 0xff}
	faintInk   = color.RGBA{R: 0x6e, G: 0x75, B: 0x7c, A: 0xff}
	gridInk    = color.RGBA{R: 0xe6, G: 0xe7, B: 0xe8, A: 0xff}
	markInk    = color.RGBA{R: 0xc4, G: 0x16, B: 0x2a, A: 0xff}
	statGreen  = color.RGBA{R: 0x37, G: 0x87, B: 0x2d, A: 0xff}
	statArea   = color.NRGBA{R: 0x37, G: 0x87, B: 0x2d, A: 0x30}
	// palette is Grafana's classic series palette.
	palette = []color.RGBA{
		{0x7e, 0xb2, 0x6d, 0xff}, {0xea, 0xb8, 0x39, 0xff}, {0x6e, 0xd0, 0xe0, 0xff}, {0xef, 0x84, 0x3c, 0xff},
		{0xe2, 0x4d, 0x42, 0xff}, {0x1f, 0x78, 0xc1, 0xff}, {0xba, 0x43, 0xa9, 0xff}, {0x70, 0x5d, 0xa0, 0xff},
		{0x50, 0x86, 0x42, 0xff}, {0xcc, 0xa3, 0x00, 0xff}, {0x44, 0x7e, 0xbc, 0xff}, {0xc1, 0x5c, 0x17, 0xff},
		{0x89, 0x0f, 0x02, 0xff}, {0x0a, 0x43, 0x7c, 0xff}, {0x6d, 0x1f, 0x62, 0xff}, {0x58, 0x44, 0x77, 0xff},
	}
	sans = font.Font{Typeface: "Liberation", Variant: "Sans"}
)

// SeriesColor is the color of a panel's i-th series (in legend order).
func SeriesColor(i int) color.RGBA { return palette[i%len(palette)] }

// Layout places a dashboard's panels on a picture width points wide: Grafana's 24 columns,
// grid units of unitHeight, below a heading. Rectangles are in the picture's coordinates,
// whose origin is the bottom left corner.
type Layout struct {
	Width, Height vg.Length
}

// NewLayout is the layout of panels on a picture width points wide: as tall as the lowest
// panel's bottom edge.
func NewLayout(panels []monitoring.Panel, width vg.Length) Layout {
	bottom := 0
	for _, p := range panels {
		bottom = max(bottom, p.GridPos.Y+p.GridPos.H)
	}
	return Layout{Width: width, Height: headerHeight + vg.Length(bottom)*unitHeight}
}

// Rect is where a panel at g is drawn: its grid cells, less half a gap on each side.
func (l Layout) Rect(g monitoring.GridPos) vg.Rectangle {
	col := l.Width / gridColumns
	top := l.Height - headerHeight - vg.Length(g.Y)*unitHeight
	return vg.Rectangle{
		Min: vg.Point{X: vg.Length(g.X)*col + gap/2, Y: top - vg.Length(g.H)*unitHeight + gap/2},
		Max: vg.Point{X: vg.Length(g.X+g.W)*col - gap/2, Y: top - gap/2},
	}
}

// Render draws panels (monitoring.DashboardPanels) as they looked over opt's window,
// querying each panel's targets with query, and returns the PNG and what each panel showed,
// in panel order (rows excluded). A query Prometheus refuses is an error: the dashboard
// would show it as one.
func Render(ctx context.Context, panels []monitoring.Panel, query RangeQuery, opt Options) ([]byte, []PanelReport, error) {
	if !opt.End.After(opt.Start) || opt.Step <= 0 {
		return nil, nil, fmt.Errorf("snapshot: empty window %s – %s or step %s", opt.Start, opt.End, opt.Step)
	}
	if len(panels) == 0 {
		return nil, nil, errors.New("snapshot: no panels")
	}
	width := opt.Width
	if width == 0 {
		width = DefaultWidth
	}
	l := NewLayout(panels, width)
	img := vgimg.NewWith(vgimg.UseWH(l.Width, l.Height), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(background))
	dc := draw.New(img)
	drawHeader(dc, l, opt)

	var reports []PanelReport
	for _, p := range panels {
		c := draw.Canvas{Canvas: dc.Canvas, Rectangle: l.Rect(p.GridPos)}
		if p.Type == "row" {
			c.FillText(textStyle(13, ink, draw.XLeft, draw.YCenter), vg.Point{X: c.Min.X + 2, Y: (c.Min.Y + c.Max.Y) / 2}, p.Title)
			continue
		}
		lines, err := panelSeries(ctx, p, query, opt)
		if err != nil {
			return nil, nil, err
		}
		rep := PanelReport{Title: p.Title, Type: p.Type, Series: len(lines)}
		for _, s := range lines {
			rep.Samples += len(s.samples)
		}
		reports = append(reports, rep)
		fillRect(c, c.Rectangle, panelFill, panelEdge)
		if p.Type == "stat" {
			drawStat(c, p, lines, opt)
		} else {
			if err := drawTimeSeries(c, p, lines, opt); err != nil {
				return nil, nil, fmt.Errorf("snapshot: panel %q: %w", p.Title, err)
			}
		}
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, nil, fmt.Errorf("snapshot: write the PNG: %w", err)
	}
	return buf.Bytes(), reports, nil
}

// namedSeries is one series of a panel with its legend name.
type namedSeries struct {
	name    string
	samples []Sample
}

// panelSeries runs a panel's queries over the window and names their series by the targets'
// legend formats, sorted by name within each target so that colors follow the legend.
func panelSeries(ctx context.Context, p monitoring.Panel, query RangeQuery, opt Options) ([]namedSeries, error) {
	var out []namedSeries
	for _, t := range p.Targets {
		expr, err := monitoring.Expand(t.Expr, opt.Vars)
		if err != nil {
			return nil, fmt.Errorf("snapshot: panel %q: %w", p.Title, err)
		}
		res, err := query(ctx, expr, opt.Start, opt.End, opt.Step)
		if err != nil {
			return nil, fmt.Errorf("snapshot: panel %q, query %s: %w", p.Title, t.RefID, err)
		}
		var named []namedSeries
		for _, s := range res {
			if len(s.Samples) > 0 {
				named = append(named, namedSeries{name: Legend(t.LegendFormat, s.Labels), samples: s.Samples})
			}
		}
		sort.SliceStable(named, func(i, j int) bool { return named[i].name < named[j].name })
		out = append(out, named...)
	}
	return out, nil
}

func drawHeader(dc draw.Canvas, l Layout, opt Options) {
	y := l.Height - headerHeight/2
	dc.FillText(textStyle(15, ink, draw.XLeft, draw.YCenter), vg.Point{X: gap, Y: y}, opt.Title)
	window := fmt.Sprintf("%s – %s UTC, every %s", opt.Start.UTC().Format("2006-01-02 15:04:05"), opt.End.UTC().Format("15:04:05"), opt.Step)
	dc.FillText(textStyle(9, faintInk, draw.XRight, draw.YCenter), vg.Point{X: l.Width - gap, Y: y}, window)
}

// drawStat draws a stat panel as Grafana does with reduce "lastNotNull" and graph mode
// "area": the title, the first series' last value that is a number, and the series as a
// faint area below it.
func drawStat(c draw.Canvas, p monitoring.Panel, lines []namedSeries, opt Options) {
	c.FillText(textStyle(9, ink, draw.XLeft, draw.YTop), vg.Point{X: c.Min.X + 6, Y: c.Max.Y - 5}, p.Title)
	if len(lines) == 0 {
		noData(c)
		return
	}
	s := lines[0].samples
	last := math.NaN()
	for i := len(s) - 1; i >= 0; i-- {
		if !math.IsNaN(s[i].V) && !math.IsInf(s[i].V, 0) {
			last = s[i].V
			break
		}
	}
	area := draw.Crop(c, 1, -1, 1, -(c.Max.Y-c.Min.Y)*0.55)
	lo, hi := valueRange(s)
	if hi == lo {
		lo, hi = lo-1, hi+1 // a flat line sits in the middle
	}
	span := opt.End.Sub(opt.Start).Seconds()
	var poly []vg.Point
	for _, smp := range s {
		if math.IsNaN(smp.V) || math.IsInf(smp.V, 0) {
			continue
		}
		x := area.X(smp.T.Sub(opt.Start).Seconds() / span)
		y := area.Y((smp.V - lo) / (hi - lo))
		if len(poly) == 0 {
			poly = append(poly, vg.Point{X: x, Y: area.Min.Y})
		}
		poly = append(poly, vg.Point{X: x, Y: y})
	}
	if len(poly) > 1 {
		poly = append(poly, vg.Point{X: poly[len(poly)-1].X, Y: area.Min.Y})
		area.FillPolygon(statArea, poly)
		area.StrokeLines(draw.LineStyle{Color: statGreen, Width: 1}, poly[1:len(poly)-1])
	}
	value := "No data"
	if !math.IsNaN(last) {
		value = FormatValue(p.Unit, last)
	}
	c.FillText(textStyle(30, statGreen, draw.XCenter, draw.YCenter), vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: c.Min.Y + (c.Max.Y-c.Min.Y)*0.45}, value)
}

// valueRange is the smallest and largest number among samples (0, 0 when there is none).
func valueRange(samples []Sample) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range samples {
		if !math.IsNaN(s.V) && !math.IsInf(s.V, 0) {
			lo, hi = min(lo, s.V), max(hi, s.V)
		}
	}
	if lo > hi {
		return 0, 0
	}
	return lo, hi
}

// drawTimeSeries draws a time-series panel: its series as lines over the window (a sample
// that is not a number breaks its line, as in Grafana), the marks, and the legend below.
func drawTimeSeries(c draw.Canvas, p monitoring.Panel, lines []namedSeries, opt Options) error {
	pl := plot.New()
	pl.BackgroundColor = color.Transparent
	pl.Title.Text = p.Title
	pl.Title.TextStyle = textStyle(9, ink, draw.XCenter, draw.YTop)
	pl.Title.Padding = 3
	for _, ax := range []*plot.Axis{&pl.X, &pl.Y} {
		ax.Tick.Label = textStyle(7, faintInk, ax.Tick.Label.XAlign, ax.Tick.Label.YAlign)
		ax.Color, ax.Tick.Color = panelEdge, panelEdge
		ax.Padding = 2
	}
	pl.X.Tick.Marker = plot.TimeTicks{Format: "15:04:05"}
	pl.X.Min, pl.X.Max = unix(opt.Start), unix(opt.End)
	lo, hi := 0.0, 0.0
	for _, s := range lines {
		l, h := valueRange(s.samples)
		lo, hi = min(lo, l), max(hi, h)
	}
	if hi == lo {
		hi = lo + 1
	}
	pl.Y.Min, pl.Y.Max = lo, hi*1.05
	pl.Y.Tick.Marker = unitTicks(p.Unit)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridInk, gridInk
	grid.Vertical.Dashes, grid.Horizontal.Dashes = nil, nil
	pl.Add(grid)
	for i, s := range lines {
		for _, seg := range segments(s.samples) {
			ln, err := plotter.NewLine(seg)
			if err != nil {
				return err
			}
			ln.Color, ln.Width = SeriesColor(i), 1.2
			pl.Add(ln)
		}
	}
	for _, m := range opt.Marks {
		pl.Add(markLine{at: unix(m.At), label: m.Label})
	}
	legendH := drawLegend(c, lines)
	plotArea := draw.Crop(c, 2, -4, legendH+2, -2)
	if len(lines) == 0 {
		noData(plotArea)
	}
	pl.Draw(plotArea)
	return nil
}

// segments splits samples into runs of numbers, as plotter lines cannot hold NaN or ±Inf.
func segments(samples []Sample) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, s := range samples {
		if math.IsNaN(s.V) || math.IsInf(s.V, 0) {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: unix(s.T), Y: s.V})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// drawLegend writes the series' names, each after a stroke of its color, left to right along
// the bottom of c, in legendLines lines at most (the rest counted as "+n more"), and returns
// the height it took.
func drawLegend(c draw.Canvas, lines []namedSeries) vg.Length {
	if len(lines) == 0 {
		return 0
	}
	sty := textStyle(7, ink, draw.XLeft, draw.YCenter)
	lineH := sty.FontExtents().Height * 1.3
	const swatch vg.Length = 10
	left, right := c.Min.X+8, c.Max.X-6
	x, row := left, 0
	for i, s := range lines {
		w := swatch + 3 + sty.Width(s.name) + 10
		if x+w > right && x > left {
			row++
			x = left
		}
		if row == legendLines-1 && i < len(lines)-1 && x+w+sty.Width("+999 more") > right {
			y := c.Min.Y + 4 + lineH*vg.Length(legendLines-1-row) + lineH/2
			c.FillText(textStyle(7, faintInk, draw.XLeft, draw.YCenter), vg.Point{X: x, Y: y}, fmt.Sprintf("+%d more", len(lines)-i))
			break
		}
		if row >= legendLines {
			break
		}
		y := c.Min.Y + 4 + lineH*vg.Length(legendLines-1-row) + lineH/2
		c.StrokeLine2(draw.LineStyle{Color: SeriesColor(i), Width: 2.5}, x, y, x+swatch, y)
		c.FillText(sty, vg.Point{X: x + swatch + 3, Y: y}, s.name)
		x += w
	}
	return lineH*legendLines + 4
}

func noData(c draw.Canvas) {
	c.FillText(textStyle(10, faintInk, draw.XCenter, draw.YCenter), c.Center(), "No data")
}

// markLine is a Mark on a time-series panel: a dashed line across the data area, its label
// at the top, right of the line unless it would leave the panel.
type markLine struct {
	at    float64
	label string
}

func (m markLine) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	at := x(m.at)
	if !c.ContainsX(at) {
		return
	}
	c.StrokeLine2(draw.LineStyle{Color: markInk, Width: 1, Dashes: []vg.Length{3, 2}}, at, c.Min.Y, at, c.Max.Y)
	sty := textStyle(6, markInk, draw.XLeft, draw.YTop)
	x0 := at + 2
	if x0+sty.Width(m.label) > c.Max.X { // a mark near the right edge is labelled on its left
		sty.XAlign, x0 = draw.XRight, at-2
	}
	c.FillText(sty, vg.Point{X: x0, Y: c.Max.Y - 1}, m.label)
}

// unitTicks labels the value axis in a panel's unit.
func unitTicks(unit string) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ticks := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = FormatValue(unit, ticks[i].Value)
			}
		}
		return ticks
	})
}

func fillRect(c draw.Canvas, r vg.Rectangle, fill, edge color.Color) {
	pts := []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}}
	c.FillPolygon(fill, pts)
	c.StrokeLines(draw.LineStyle{Color: edge, Width: 0.7}, append(pts, r.Min))
}

func textStyle(size vg.Length, clr color.Color, x draw.XAlignment, y draw.YAlignment) text.Style {
	return text.Style{Color: clr, Font: font.From(sans, size), XAlign: x, YAlign: y, Handler: plot.DefaultTextHandler}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
