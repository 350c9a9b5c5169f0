package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Prometheus answers range queries from the Prometheus at base (http://host:port) with its
// HTTP API's /api/v1/query_range, as Grafana's Prometheus data source does.
func Prometheus(base string, client *http.Client) RangeQuery {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
		q := url.Values{
			"query": {expr},
			"start": {unixSeconds(start)},
			"end":   {unixSeconds(end)},
			"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query_range?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("query_range %q: %w", expr, err)
		}
		return parseMatrix(expr, body)
	}
}

func unixSeconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// parseMatrix reads a query_range answer: a matrix of series, each a label set and
// [unix seconds, "value"] pairs. An answer of status "error" is returned as its error.
func parseMatrix(expr string, body []byte) ([]Series, error) {
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string    `json:"metric"`
				Values [][2]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query_range %q: read the answer: %w", expr, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query_range %q: %s: %s", expr, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("query_range %q: result type %q, want matrix", expr, r.Data.ResultType)
	}
	out := make([]Series, 0, len(r.Data.Result))
	for _, res := range r.Data.Result {
		s := Series{Labels: res.Metric, Samples: make([]Sample, 0, len(res.Values))}
		for _, pair := range res.Values {
			var ts float64
			var val string
			if err := json.Unmarshal(pair[0], &ts); err != nil {
				return nil, fmt.Errorf("query_range %q: a sample's time: %w", expr, err)
			}
			if err := json.Unmarshal(pair[1], &val); err != nil {
				return nil, fmt.Errorf("query_range %q: a sample's value: %w", expr, err)
			}
			v, err := strconv.ParseFloat(val, 64) // Prometheus writes NaN and ±Inf as "NaN", "+Inf", "-Inf"
			if err != nil {
				return nil, fmt.Errorf("query_range %q: a sample's value %q: %w", expr, val, err)
			}
			sec, frac := math.Modf(ts)
			s.Samples = append(s.Samples, Sample{T: time.Unix(int64(sec), int64(frac*1e9)), V: v})
		}
		out = append(out, s)
	}
	return out, nil
}
