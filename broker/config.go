package broker

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/registry"
)

// Config is everything `paddock broker` is told at start: flags (docs/architecture.md, "The broker pod"), each with a
// PADDOCK_<FLAG> environment default, and the pod identity from the downward API.
type Config struct {
	Cluster           string
	Listeners         []cluster.ListenerSpec
	HealthPort        int
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
	DrainTimeout      time.Duration
	DataDir           string
	ClusterDomain     string
	BindAddress       string
	LogLevel          string
	// Bounds are the resource bounds (bounds.go); DefaultBounds when not parsed from flags.
	Bounds Bounds
	// bounds holds the bound flags' values until parseConfig parses them.
	bounds map[string]*string
	// MetricsPartitionLimit bounds the per-partition series /metrics shows (metrics_partitions.go):
	// past it only the broker-wide totals are exported. 0 takes DefaultMetricsPartitionLimit;
	// a negative limit exports none.
	MetricsPartitionLimit int

	Identity cluster.Identity
}

// Secured reports whether a listener has TLS or authentication: the broker then reads its
// certificate, the credentials and the KafkaUsers (docs/security.md).
func (c Config) Secured() bool {
	for _, l := range c.Listeners {
		if l.TLS || l.Authentication != "" {
			return true
		}
	}
	return false
}

// envName is the environment variable that defaults flag name: PADDOCK_<NAME_IN_UPPER_SNAKE>.
func envName(flagName string) string {
	return "PADDOCK_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet declares every flag on cfg. Each flag's default is its PADDOCK_ variable when set;
// an explicit flag wins. A malformed environment value is reported by parseConfig.
// listFlags are the flags whose text parseConfig reads into Config.Listeners.
type listFlags struct {
	listeners, templates, security string
}

func newFlagSet(cfg *Config, lists *listFlags, getenv func(string) string) (*flag.FlagSet, *[]error) {
	fs := flag.NewFlagSet("paddock broker", flag.ContinueOnError)
	var envErrs []error
	str := func(p *string, name, def, usage string) {
		if v := getenv(envName(name)); v != "" {
			def = v
		}
		fs.StringVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		if v := getenv(envName(name)); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s=%q: %w", envName(name), v, err))
			} else {
				def = d
			}
		}
		fs.DurationVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	num := func(p *int, name string, def int, usage string) {
		if v := getenv(envName(name)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s=%q: %w", envName(name), v, err))
			} else {
				def = n
			}
		}
		fs.IntVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	str(&cfg.Cluster, "cluster", "", "name of the KafkaCluster this broker belongs to (required)")
	str(&lists.listeners, "listeners", "kafka:9092:PodDNS",
		"comma-separated listeners name:port:how, how PodDNS (advertise <pod>.<cluster>-brokers.<ns>.svc.<domain>), PodIP (advertise $POD_IP), "+
			"NodePort (advertise the node's ExternalIP, else InternalIP, and this broker's nodePort) or LoadBalancer (advertise this broker's load-balancer ingress)")
	str(&lists.templates, "advertised-host-templates", "",
		"comma-separated name=template: the host advertised on listener name instead, with {id}, {pod}, {namespace}, {node} and {nodeAddress} replaced")
	str(&lists.security, "listener-security", "",
		"comma-separated name=tls, name=<authentication> or name=tls+<authentication>: listener name serves TLS with this broker's certificate and/or "+
			"authenticates its clients, authentication scram-sha-512, scram-sha-256, plain (with tls) or tls (mutual TLS)")
	num(&cfg.HealthPort, "health-port", 9644, "port of the /healthz, /readyz and /metrics HTTP server")
	dur(&cfg.HeartbeatInterval, "heartbeat-interval", time.Second, "how often the heartbeat Lease is renewed")
	dur(&cfg.SessionTimeout, "session-timeout", 6*time.Second, "heartbeat Lease duration (leaseDurationSeconds); whole seconds")
	dur(&cfg.DrainTimeout, "drain-timeout", time.Minute, "longest time to keep serving after SIGTERM while work moves away")
	str(&cfg.DataDir, "data-dir", "/var/lib/paddock", "directory of the cluster's shared data volume (partition data; deleted topics' data is removed from it)")
	str(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain used in PodDNS advertised hosts")
	str(&cfg.BindAddress, "bind-address", "", "IP address the listeners and the health server bind to; empty binds every interface")
	cfg.bounds = boundFlags(str)
	str(&cfg.LogLevel, "log-level", "info", "log level: debug, info or error")
	num(&cfg.MetricsPartitionLimit, "metrics-partition-limit", DefaultMetricsPartitionLimit,
		"most partitions (led here, or committed to by a group coordinated here) given per-partition series on /metrics; past it the broker exports totals only and counts what it left out; negative exports none")
	return fs, &envErrs
}

// parseConfig parses args and the environment into a validated Config.
func parseConfig(cfg *Config, lists listFlags, envErrs []error, getenv func(string) string) error {
	if len(envErrs) > 0 {
		return errors.Join(envErrs...)
	}
	if cfg.Cluster == "" {
		return errors.New("--cluster is required")
	}
	if cfg.HeartbeatInterval <= 0 || cfg.SessionTimeout < time.Second || cfg.HeartbeatInterval >= cfg.SessionTimeout {
		return fmt.Errorf("need 0 < --heartbeat-interval (%s) < --session-timeout (%s), session timeout at least 1s", cfg.HeartbeatInterval, cfg.SessionTimeout)
	}
	if cfg.SessionTimeout%time.Second != 0 {
		return fmt.Errorf("--session-timeout %s is not a whole number of seconds", cfg.SessionTimeout)
	}
	if cfg.DrainTimeout < 0 {
		return fmt.Errorf("--drain-timeout %s is negative", cfg.DrainTimeout)
	}
	bounds, err := parseBounds(cfg.bounds)
	if err != nil {
		return err
	}
	cfg.Bounds = bounds
	id, err := identityFromEnv(cfg.Cluster, getenv)
	if err != nil {
		return err
	}
	cfg.Identity = id
	ls, err := parseListeners(lists.listeners)
	if err != nil {
		return err
	}
	if err := parseTemplates(ls, lists.templates); err != nil {
		return err
	}
	if err := parseSecurity(ls, lists.security); err != nil {
		return err
	}
	for i := range ls {
		switch {
		case ls[i].Template != "":
			ls[i].Host = cluster.ExpandTemplate(ls[i].Template, id)
		case ls[i].Type == v1alpha1.ListenerInternal:
			h, err := advertisedHost(ls[i].Mode, cfg.Cluster, cfg.ClusterDomain, id)
			if err != nil {
				return fmt.Errorf("listener %s: %w", ls[i].Name, err)
			}
			ls[i].Host = h
		}
	}
	cfg.Listeners = ls
	return nil
}

// parseTemplates sets the Template of the listeners s names: name=template[,...].
func parseTemplates(ls []cluster.ListenerSpec, s string) error {
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, tmpl, ok := strings.Cut(item, "=")
		i := slices.IndexFunc(ls, func(l cluster.ListenerSpec) bool { return l.Name == name })
		switch {
		case !ok || tmpl == "":
			return fmt.Errorf("advertised host template %q: want name=template", item)
		case i < 0:
			return fmt.Errorf("advertised host template %q: no listener %q", item, name)
		case ls[i].Template != "":
			return fmt.Errorf("advertised host template %q: listener %s has one already", item, name)
		}
		ls[i].Template = tmpl
	}
	return nil
}

// parseSecurity sets the TLS and Authentication of the listeners s names:
// name=tls|<authentication>|tls+<authentication>[,...]. PLAIN and mutual TLS need TLS, as
// the API requires.
func parseSecurity(ls []cluster.ListenerSpec, s string) error {
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, how, ok := strings.Cut(item, "=")
		i := slices.IndexFunc(ls, func(l cluster.ListenerSpec) bool { return l.Name == name })
		switch {
		case !ok || how == "":
			return fmt.Errorf("listener security %q: want name=tls+authentication", item)
		case i < 0:
			return fmt.Errorf("listener security %q: no listener %q", item, name)
		case seen[name]:
			return fmt.Errorf("listener security %q: listener %s has one already", item, name)
		}
		seen[name] = true
		for _, part := range strings.Split(how, "+") {
			switch auth := v1alpha1.ListenerAuthenticationType(part); {
			case part == "tls" && !ls[i].TLS && ls[i].Authentication == "":
				ls[i].TLS = true
			case ls[i].Authentication == "" && slices.Contains([]v1alpha1.ListenerAuthenticationType{
				v1alpha1.AuthenticationScramSHA512, v1alpha1.AuthenticationScramSHA256, v1alpha1.AuthenticationPlain, v1alpha1.AuthenticationTLS}, auth):
				ls[i].Authentication = auth
			default:
				return fmt.Errorf("listener security %q: %q is not tls or one authentication after it (scram-sha-512, scram-sha-256, plain, tls)", item, part)
			}
		}
		if (ls[i].Authentication == v1alpha1.AuthenticationPlain || ls[i].Authentication == v1alpha1.AuthenticationTLS) && !ls[i].TLS {
			return fmt.Errorf("listener security %q: %s authentication needs tls", item, ls[i].Authentication)
		}
	}
	return nil
}

// identityFromEnv reads the pod identity. The broker id is the registry's own rule for pod
// names (registry.Ordinal): a pod the registry would not register as a broker of cluster is
// refused here, so a broker can never claim an id the registry does not give it.
func identityFromEnv(clusterName string, getenv func(string) string) (cluster.Identity, error) {
	id := cluster.Identity{
		Pod:       getenv("POD_NAME"),
		Namespace: getenv("POD_NAMESPACE"),
		UID:       getenv("POD_UID"),
		IP:        getenv("POD_IP"),
		Node:      getenv("NODE_NAME"),
	}
	if id.Pod == "" || id.Namespace == "" {
		return id, errors.New("POD_NAME and POD_NAMESPACE must be set (downward API)")
	}
	n, ok := registry.Ordinal(clusterName, id.Pod)
	if !ok {
		return id, fmt.Errorf("POD_NAME %q is not a broker pod of cluster %s (want %s<id>, the id without leading zeros)",
			id.Pod, clusterName, v1alpha1.StatefulSetName(clusterName)+"-")
	}
	id.ID = n
	return id, nil
}

// parseListeners parses name:port:how[,...]; how defaults to PodDNS when omitted.
func parseListeners(s string) ([]cluster.ListenerSpec, error) {
	var out []cluster.ListenerSpec
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("listener %q: want name:port:mode", item)
		}
		port, err := strconv.ParseUint(parts[1], 10, 16)
		if err != nil || port == 0 {
			return nil, fmt.Errorf("listener %q: bad port %q", item, parts[1])
		}
		l := cluster.ListenerSpec{Name: parts[0], Port: int32(port), Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodDNS}
		if len(parts) == 3 {
			switch how := parts[2]; how {
			case string(v1alpha1.AdvertisePodDNS), string(v1alpha1.AdvertisePodIP):
				l.Mode = v1alpha1.AdvertisedHostMode(how)
			case string(v1alpha1.ListenerNodePort), string(v1alpha1.ListenerLoadBalancer):
				l.Type, l.Mode = v1alpha1.ListenerType(how), ""
			default:
				return nil, fmt.Errorf("listener %q: %q is not PodDNS, PodIP, NodePort or LoadBalancer", item, how)
			}
		}
		if seen[parts[0]] {
			return nil, fmt.Errorf("listener %q: duplicate name", parts[0])
		}
		seen[parts[0]] = true
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, errors.New("--listeners is empty")
	}
	return out, nil
}

// advertisedHost is the host clients are told for a listener in mode (docs/architecture.md, "The broker pod").
func advertisedHost(mode v1alpha1.AdvertisedHostMode, clusterName, domain string, id cluster.Identity) (string, error) {
	if mode == v1alpha1.AdvertisePodIP {
		if id.IP == "" {
			return "", errors.New("mode PodIP needs POD_IP")
		}
		return id.IP, nil
	}
	return fmt.Sprintf("%s.%s.%s.svc.%s", id.Pod, v1alpha1.HeadlessServiceName(clusterName), id.Namespace, domain), nil
}
