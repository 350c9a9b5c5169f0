package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeKind names the three kubelet probes.
type probeKind int

const (
	probeStartup probeKind = iota
	probeReadiness
	probeLiveness
)

// probeResult is what the probe loops of one container incarnation tell its pod worker.
// For startup and liveness only the verdict is sent (ok=false: kill the container); for
// readiness every change.
type probeResult struct {
	kind probeKind
	ok   bool
}

// runProbes runs a container incarnation's probes the way the kubelet does: the startup probe
// until it succeeds, then readiness and liveness side by side. It returns when ctx ends (the
// container exited) or the container must be killed.
func runProbes(ctx context.Context, c corev1.Container, podIP string, send func(probeResult)) {
	if c.StartupProbe != nil {
		if !probeLoop(ctx, c.StartupProbe, c, podIP, true, func(ok bool) {}) {
			if ctx.Err() == nil {
				send(probeResult{kind: probeStartup, ok: false})
			}
			return
		}
	}
	send(probeResult{kind: probeStartup, ok: true})
	if c.ReadinessProbe == nil {
		send(probeResult{kind: probeReadiness, ok: true})
	} else {
		go probeLoop(ctx, c.ReadinessProbe, c, podIP, false, func(ok bool) {
			send(probeResult{kind: probeReadiness, ok: ok})
		})
	}
	if c.LivenessProbe != nil {
		probeLoop(ctx, c.LivenessProbe, c, podIP, false, func(ok bool) {
			if !ok {
				send(probeResult{kind: probeLiveness, ok: false})
			}
		})
	}
	<-ctx.Done()
}

// probeLoop probes every period and calls changed when the verdict (after the success and
// failure thresholds) changes; the first verdict is always reported. With untilSuccess it
// returns true at the first success verdict and false at the first failure verdict;
// otherwise it runs until ctx ends or a failure verdict was reported for a liveness-style
// caller (which kills the container, ending ctx).
func probeLoop(ctx context.Context, p *corev1.Probe, c corev1.Container, podIP string, untilSuccess bool, changed func(bool)) bool {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	successThreshold, failureThreshold := max(p.SuccessThreshold, 1), max(p.FailureThreshold, 1)
	if p.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	if p.FailureThreshold == 0 {
		failureThreshold = 3
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(p.InitialDelaySeconds) * time.Second):
	}
	var successes, failures int32
	verdict, reported := false, false
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		err := probeOnce(ctx, p, c, podIP, timeout)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
		}
		switch {
		case successes >= successThreshold && (!verdict || !reported):
			verdict, reported = true, true
			changed(true)
			if untilSuccess {
				return true
			}
		case failures >= failureThreshold && (verdict || !reported):
			verdict, reported = false, true
			changed(false)
			if untilSuccess {
				return false
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
		}
	}
}

// probeOnce runs one probe; nil means success.
func probeOnce(ctx context.Context, p *corev1.Probe, c corev1.Container, podIP string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		port, err := resolvePort(p.HTTPGet.Port, c)
		if err != nil {
			return err
		}
		host := p.HTTPGet.Host
		if host == "" {
			host = podIP
		}
		scheme := "http"
		if p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: p.HTTPGet.Path}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		for _, h := range p.HTTPGet.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		resp, err := probeHTTPClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close() // a probe reads only the status
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s", u.String(), resp.Status)
		}
		return nil
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(podIP, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	default:
		return errors.New("paddock dev runs httpGet and tcpSocket probes only")
	}
}

// probeHTTPClient does not keep connections: each probe is a fresh request, as the kubelet's.
var probeHTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// resolvePort turns a numeric or named container port into a number.
func resolvePort(port intstr.IntOrString, c corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}
