package promexport_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/meshd/meshd/internal/testwait"
)

// sample is one parsed series.
type sample struct {
	labels map[string]string
	value  float64
}

// exposition is a parsed /metrics answer: samples by family name.
type exposition map[string][]sample

// parseText parses the Prometheus text format.
func parseText(r io.Reader) (exposition, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := exposition{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.value = m.GetUntyped().GetValue()
			default:
				continue // summaries and histograms (go_*) are not checked
			}
			out[name] = append(out[name], s)
		}
	}
	return out, nil
}

// scrapeURL fetches and parses url, failing the test on any error.
func scrapeURL(t testing.TB, url string) exposition {
	t.Helper()
	e, err := tryScrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// noKeepAlive is the client tests scrape with, so no idle connection
// outlives a test (and the goroutine checks see none).
var noKeepAlive = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func tryScrape(url string) (exposition, error) {
	resp, err := noKeepAlive.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return nil, fmt.Errorf("GET %s: content type %q, want text/plain", url, ct)
	}
	return parseText(resp.Body)
}

// value returns the sample of family name whose labels are exactly want.
func (e exposition) value(name string, want map[string]string) (float64, bool) {
	for _, s := range e[name] {
		if len(s.labels) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

// sum adds up every sample of family name.
func (e exposition) sum(name string) float64 {
	var t float64
	for _, s := range e[name] {
		t += s.value
	}
	return t
}

// must returns the value of a series that must exist.
func (e exposition) must(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := e.value(name, labels)
	if !ok {
		t.Fatalf("no series %s%v; have %v", name, labels, e.describe(name))
	}
	return v
}

func (e exposition) describe(name string) []string {
	var out []string
	for _, s := range e[name] {
		out = append(out, fmt.Sprintf("%v=%g", s.labels, s.value))
	}
	sort.Strings(out)
	return out
}

// l builds a label set from key, value pairs.
func l(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// checkNoLeak fails if the goroutine count does not come back to before
// within a few seconds.
func checkNoLeak(t testing.TB, before int) {
	t.Helper()
	if !testwait.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf)
	}
}
