package snapshot

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// legendPlaceholder is a {{label}} of a Grafana legend format, spaces allowed inside the braces.
var legendPlaceholder = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// Legend names a series as Grafana does: the target's legend format with each {{label}}
// replaced by the series' value of that label (empty when it has none). Without a format the
// series is named by its labels, `metric{a="1", b="2"}`, or "value" when it has none (an
// aggregate over everything).
func Legend(format string, labels map[string]string) string {
	if format != "" {
		return legendPlaceholder.ReplaceAllStringFunc(format, func(ref string) string {
			return labels[legendPlaceholder.FindStringSubmatch(ref)[1]]
		})
	}
	var keys []string
	for k := range labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	name := labels["__name__"]
	if len(keys) == 0 {
		if name == "" {
			return "value"
		}
		return name
	}
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return name + "{" + strings.Join(pairs, ", ") + "}"
}

// FormatValue writes v in a Grafana unit, as its axes and stat panels show it: "s" (from µs
// to hours), "bytes" (IEC: KiB, MiB, …), "Bps" (SI bytes per second: kB/s, MB/s, …), "reqps",
// "percentunit" (a ratio shown as a percentage); any other unit, and none, is Grafana's
// "short": a plain number with K, Mil, Bil for thousands, millions and billions. Three
// significant digits at most.
func FormatValue(unit string, v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 0):
		if v > 0 {
			return "+Inf"
		}
		return "-Inf"
	}
	switch unit {
	case "percentunit":
		return digits(v*100) + "%"
	case "s":
		a := math.Abs(v)
		switch {
		case a == 0:
			return "0 s"
		case a < 1e-3:
			return digits(v*1e6) + " µs"
		case a < 1:
			return digits(v*1e3) + " ms"
		case a < 60:
			return digits(v) + " s"
		case a < 3600:
			return digits(v/60) + " min"
		default:
			return digits(v/3600) + " h"
		}
	case "bytes":
		return scaled(v, 1024, []string{" B", " KiB", " MiB", " GiB", " TiB", " PiB"})
	case "Bps":
		return scaled(v, 1000, []string{" B/s", " kB/s", " MB/s", " GB/s", " TB/s"})
	case "reqps":
		return scaled(v, 1000, []string{"", "K", " Mil", " Bil"}) + " req/s"
	default:
		return scaled(v, 1000, []string{"", "K", " Mil", " Bil", " Tri"})
	}
}

// scaled divides v by base until it is below base or the suffixes run out, and writes it
// with the suffix of the power it was divided by.
func scaled(v, base float64, suffixes []string) string {
	i := 0
	for math.Abs(v) >= base && i < len(suffixes)-1 {
		v /= base
		i++
	}
	return digits(v) + suffixes[i]
}

// digits writes v with three significant digits at most (none after the point from 100 up),
// without trailing zeros.
func digits(v float64) string {
	a := math.Abs(v)
	var s string
	switch {
	case a >= 100:
		s = fmt.Sprintf("%.0f", v)
	case a >= 10:
		s = fmt.Sprintf("%.1f", v)
	default:
		s = fmt.Sprintf("%.2f", v)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}
