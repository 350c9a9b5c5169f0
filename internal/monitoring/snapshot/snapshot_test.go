package snapshot

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/paddock-dev/paddock/internal/monitoring"
)

func TestLegendFillsPlaceholdersAndNamesUnformattedSeriesByLabels(t *testing.T) {
	labels := map[string]string{"broker": "1", "state": "Serving", "health": "Dead"}
	for _, tc := range []struct {
		format string
		labels map[string]string
		want   string
	}{
		{"broker {{broker}} {{state}}/{{health}}", labels, "broker 1 Serving/Dead"},
		{"{{ broker }}", labels, "1"},
		{"{{missing}} in", labels, " in"},
		{"out", nil, "out"},
		{"", map[string]string{"state": "x", "api": "Produce"}, `{api="Produce", state="x"}`},
		{"", map[string]string{"__name__": "up", "job": "j"}, `up{job="j"}`},
		{"", map[string]string{"__name__": "up"}, "up"},
		{"", nil, "value"},
	} {
		if got := Legend(tc.format, tc.labels); got != tc.want {
			t.Errorf("Legend(%q, %v) = %q, want %q", tc.format, tc.labels, got, tc.want)
		}
	}
}

func TestFormatValueWritesGrafanasUnits(t *testing.T) {
	for _, tc := range []struct {
		unit string
		v    float64
		want string
	}{
		{"s", 0, "0 s"},
		{"s", 0.00042, "420 µs"},
		{"s", 0.0123, "12.3 ms"},
		{"s", 2.5, "2.5 s"},
		{"s", 90, "1.5 min"},
		{"s", 7200, "2 h"},
		{"bytes", 512, "512 B"},
		{"bytes", 1536, "1.5 KiB"},
		{"bytes", 3 << 30, "3 GiB"},
		{"Bps", 1500, "1.5 kB/s"},
		{"Bps", 2.25e6, "2.25 MB/s"},
		{"reqps", 12, "12 req/s"},
		{"reqps", 4200, "4.2K req/s"},
		{"percentunit", 0.375, "37.5%"},
		{"", 3, "3"},
		{"", 0.5, "0.5"},
		{"", 1234567, "1.23 Mil"},
		{"", -2000, "-2K"},
		{"", math.NaN(), "NaN"},
		{"", math.Inf(1), "+Inf"},
	} {
		if got := FormatValue(tc.unit, tc.v); got != tc.want {
			t.Errorf("FormatValue(%q, %v) = %q, want %q", tc.unit, tc.v, got, tc.want)
		}
	}
}

func TestLayoutPlacesPanelsOnGrafanasTwentyFourColumnGrid(t *testing.T) {
	panels := []monitoring.Panel{
		{Type: "row", GridPos: monitoring.GridPos{X: 0, Y: 0, W: 24, H: 1}},
		{Type: "timeseries", GridPos: monitoring.GridPos{X: 12, Y: 1, W: 12, H: 7}},
	}
	l := NewLayout(panels, 1200)
	if want := headerHeight + 8*unitHeight; l.Height != want {
		t.Fatalf("height %v, want %v (the header and 8 grid units)", l.Height, want)
	}
	row := l.Rect(panels[0].GridPos)
	if row.Min.X != gap/2 || row.Max.X != 1200-gap/2 || row.Max.Y != l.Height-headerHeight-gap/2 {
		t.Errorf("a full-width row at the top is at %v", row)
	}
	right := l.Rect(panels[1].GridPos)
	if right.Min.X != 600+gap/2 || right.Max.X != 1200-gap/2 || right.Min.Y != gap/2 || right.Max.Y != l.Height-headerHeight-unitHeight-gap/2 {
		t.Errorf("the right half below the row is at %v", right)
	}
}

func TestParseMatrixReadsSamplesNaNAndErrors(t *testing.T) {
	got, err := parseMatrix("q", []byte(`{"status":"success","data":{"resultType":"matrix","result":[
		{"metric":{"broker":"1"},"values":[[1700000000.5,"3"],[1700000001.5,"NaN"],[1700000002.5,"+Inf"]]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Labels["broker"] != "1" || len(got[0].Samples) != 3 {
		t.Fatalf("got %+v", got)
	}
	s := got[0].Samples
	if !s[0].T.Equal(time.Unix(1700000000, 5e8)) || s[0].V != 3 || !math.IsNaN(s[1].V) || !math.IsInf(s[2].V, 1) {
		t.Errorf("samples %+v", s)
	}
	if _, err := parseMatrix("q", []byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`)); err == nil || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("an error answer: %v", err)
	}
	if _, err := parseMatrix("q", []byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`)); err == nil {
		t.Error("a vector was read as a matrix")
	}
}

// fixedQuery answers each expression with the series of answers, and an error for one
// containing "refuse".
func fixedQuery(answers map[string][]Series) RangeQuery {
	return func(_ context.Context, expr string, _, _ time.Time, _ time.Duration) ([]Series, error) {
		if strings.Contains(expr, "refuse") {
			return nil, errors.New("bad_data: refused")
		}
		return answers[expr], nil
	}
}

func ramp(start time.Time, n int, f func(i int) float64) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{T: start.Add(time.Duration(i) * time.Second), V: f(i)}
	}
	return out
}

// A series is drawn in its own panel in its color, nowhere else; a panel whose queries
// return nothing is reported empty; a refused query fails the picture.
func TestRenderDrawsEachSeriesInsideItsPanel(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	panels := []monitoring.Panel{
		{Type: "row", Title: "Overview", GridPos: monitoring.GridPos{X: 0, Y: 0, W: 24, H: 1}},
		{Type: "timeseries", Title: "Left", Unit: "s", GridPos: monitoring.GridPos{X: 0, Y: 1, W: 12, H: 7},
			Targets: []monitoring.Target{{RefID: "A", Expr: `left{ns=~"$ns"}`, LegendFormat: "broker {{broker}}"}}},
		{Type: "stat", Title: "Stat", GridPos: monitoring.GridPos{X: 12, Y: 1, W: 6, H: 4},
			Targets: []monitoring.Target{{RefID: "A", Expr: "stat"}}},
		{Type: "timeseries", Title: "Empty", GridPos: monitoring.GridPos{X: 18, Y: 1, W: 6, H: 7},
			Targets: []monitoring.Target{{RefID: "A", Expr: "empty"}}},
	}
	answers := map[string][]Series{
		`left{ns=~".*"}`: {{Labels: map[string]string{"broker": "0"}, Samples: ramp(start, 60, func(i int) float64 {
			if i == 30 {
				return math.NaN() // a gap in the line, not an error
			}
			return float64(i % 7)
		})}},
		"stat": {{Samples: ramp(start, 60, func(i int) float64 { return float64(i / 20) })}},
	}
	opt := Options{Title: "test", Start: start, End: start.Add(time.Minute), Step: time.Second,
		Vars: map[string]string{"ns": ".*"}, Marks: []Mark{{At: start.Add(20 * time.Second), Label: "SIGSTOP"}}}
	b, reports, err := Render(context.Background(), panels, fixedQuery(answers), opt)
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("SNAPSHOT_TEST_OUT"); dir != "" {
		_ = os.WriteFile(dir+"/render-test.png", b, 0o644)
	}
	want := []PanelReport{{"Left", "timeseries", 1, 60}, {"Stat", "stat", 1, 60}, {"Empty", "timeseries", 0, 0}}
	if len(reports) != len(want) {
		t.Fatalf("reports %+v, want %+v", reports, want)
	}
	for i := range want {
		if reports[i] != want[i] {
			t.Errorf("report %d: %+v, want %+v", i, reports[i], want[i])
		}
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLayout(panels, DefaultWidth)
	scale := float64(dpi) / 72
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != int(math.Round(float64(l.Width)*scale)) || h != int(math.Round(float64(l.Height)*scale)) {
		t.Errorf("picture %d×%d px, layout %v×%v pt at %d dpi", w, h, l.Width, l.Height, dpi)
	}
	toPixels := func(r vg.Rectangle) image.Rectangle {
		return image.Rect(int(float64(r.Min.X)*scale), int(float64(l.Height-r.Max.Y)*scale), int(float64(r.Max.X)*scale), int(float64(l.Height-r.Min.Y)*scale))
	}
	series := SeriesColor(0)
	inside, outside := 0, 0
	left := toPixels(l.Rect(panels[1].GridPos))
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if !near(img.At(x, y), series) {
				continue
			}
			if (image.Point{X: x, Y: y}).In(left) {
				inside++
			} else {
				outside++
			}
		}
	}
	if inside < 200 || outside != 0 {
		t.Errorf("pixels of the series' color: %d inside its panel (want a line's worth, ≥ 200), %d outside it (want 0)", inside, outside)
	}

	panels[3].Targets[0].Expr = "refuse"
	if _, _, err := Render(context.Background(), panels, fixedQuery(answers), opt); err == nil || !strings.Contains(err.Error(), `panel "Empty"`) {
		t.Errorf("a refused query: %v", err)
	}
}

// near reports whether c is within a small distance of want on every channel.
func near(c color.Color, want color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	d := func(a uint32, w uint8) bool { return math.Abs(float64(a>>8)-float64(w)) <= 2 }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}
