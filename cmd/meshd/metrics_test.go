package main

import (
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// metricsAddr matches the log line that gives the bound metrics address.
var metricsAddr = regexp.MustCompile(`msg="metrics endpoint listening" addr=(\S+)`)

// waitMetricsAddr waits for meshd to log where its metrics endpoint listens.
func waitMetricsAddr(t *testing.T, d *daemon) string {
	t.Helper()
	var m []string
	if !testwait.Until(15*time.Second, func() bool { m = metricsAddr.FindStringSubmatch(d.stderr.String()); return m != nil }) {
		t.Fatalf("meshd did not log its metrics address\n%s", d.stderr.String())
	}
	return m[1]
}

// scrapeFamilies fetches url and parses its metric families.
func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// scrapeValues fetches url and returns the value of every series without
// labels, and the names of every family.
func scrapeValues(t *testing.T, url string) (map[string]float64, map[string]bool) {
	t.Helper()
	values, families := map[string]float64{}, map[string]bool{}
	for name, mf := range scrapeFamilies(t, url) {
		families[name] = true
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		values[name] = sum
	}
	return values, families
}

func TestMetricsEndpoint(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "m")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "m",
		"--metrics", "127.0.0.1:0")
	s := waitStatus(t, meshctl, h, d)
	addr := waitMetricsAddr(t, d)
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Fatalf("metrics address %s, want 127.0.0.1", addr)
	}
	url := "http://" + addr + "/metrics"

	v, fams := scrapeValues(t, url)
	if got := v["meshd_roster_version"]; got != float64(s.RosterVersion) {
		t.Errorf("meshd_roster_version = %g, want %d", got, s.RosterVersion)
	}
	if got := v["meshd_roster_members"]; got != 1 {
		t.Errorf("meshd_roster_members = %g, want 1", got)
	}
	if got := v["meshd_links"]; got != 0 {
		t.Errorf("meshd_links = %g, want 0 on a lone node", got)
	}
	for _, name := range []string{
		"meshd_uptime_seconds", "meshd_history_db_bytes", "meshd_queue_capacity",
		"meshd_envelopes_received_total", "meshd_handshakes_total", "meshd_presence_members",
		"process_start_time_seconds", "go_goroutines",
	} {
		if !fams[name] {
			t.Errorf("%s missing from /metrics", name)
		}
	}

	// SIGTERM stops the endpoint with the node.
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("meshd exit after SIGTERM: %v\n%s", err, d.stderr.String())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("metrics endpoint %s still answers after meshd stopped", addr)
	}
}

func TestMetricsAddressChecks(t *testing.T) {
	testpar.Parallel(t)
	home := filepath.Join(t.TempDir(), "m")
	for _, c := range []struct {
		args []string
		env  map[string]string
		code int
		want []string // in stderr
	}{
		{args: []string{"--metrics", "0.0.0.0:9464"}, code: 2,
			want: []string{"meshd: --metrics:", "not a loopback address", "hint:", "--metrics-allow-remote"}},
		{args: []string{"--metrics", ":9464"}, code: 2, want: []string{"not a loopback address"}},
		{env: map[string]string{"MESH_METRICS": "192.0.2.1:9464"}, code: 2, want: []string{"not a loopback address"}},
		{args: []string{"--metrics", "9464"}, code: 2, want: []string{"want HOST:PORT"}},
	} {
		var stdout, stderr strings.Builder
		args := append([]string{"--home", home, "--no-mdns"}, c.args...)
		if code := run(args, &stdout, &stderr, envOf(c.env)); code != c.code {
			t.Errorf("meshd %v (env %v): exit %d, want %d\n%s", c.args, c.env, code, c.code, stderr.String())
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("meshd %v (env %v): stderr lacks %q:\n%s", c.args, c.env, w, stderr.String())
			}
		}
	}

	// Off by default; the flag, the env var and the file set it.
	for _, c := range []struct {
		args  []string
		env   map[string]string
		addr  string
		allow bool
	}{
		{addr: ""},
		{args: []string{"--metrics", "127.0.0.1:9464"}, addr: "127.0.0.1:9464"},
		{env: map[string]string{"MESH_METRICS": "[::1]:9464", "MESH_METRICS_ALLOW_REMOTE": "true"}, addr: "[::1]:9464", allow: true},
		{args: []string{"--metrics", "0.0.0.0:9464", "--metrics-allow-remote"}, addr: "0.0.0.0:9464", allow: true},
	} {
		cfg, err := resolve(t, append([]string{"--home", home}, c.args...), c.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Metrics != c.addr || cfg.MetricsAllowRemote != c.allow {
			t.Errorf("%v %v: metrics %q allow %v, want %q %v", c.args, c.env, cfg.Metrics, cfg.MetricsAllowRemote, c.addr, c.allow)
		}
	}
}

// A busy metrics port stops meshd with a clear error and releases the home.
func TestMetricsBusyPort(t *testing.T) {
	testpar.Parallel(t)
	meshd, _ := buildBinaries(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h := filepath.Join(t.TempDir(), "m")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--metrics", ln.Addr().String())
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		t.Fatal("meshd with a busy metrics port did not exit")
	}
	var ee interface{ ExitCode() int }
	if !errors.As(d.err, &ee) || ee.ExitCode() != 1 || !strings.Contains(d.stderr.String(), "meshd: --metrics:") {
		t.Fatalf("meshd: %v\n%s", d.err, d.stderr.String())
	}
	// The node was closed: another meshd can take the home.
	d2 := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	defer d2.stop(syscall.SIGTERM)
	if !testwait.Until(15*time.Second, func() bool {
		select {
		case <-d2.done:
			t.Fatalf("second meshd exited: %v\n%s", d2.err, d2.stderr.String())
		default:
		}
		return strings.Contains(d2.stderr.String(), "meshd running")
	}) {
		t.Fatalf("second meshd did not start\n%s", d2.stderr.String())
	}
}
