package kafkaconfig

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// StaticFlags are the `paddock broker` flags for the static broker keys a KafkaCluster
// spec.config sets (Key.Flag), as --flag=value in key order: how those settings reach the
// brokers (docs/bounds.md). Entries that do not pass their check are left out (the operator
// reports them as InvalidConfig; the broker keeps its default).
func StaticFlags(config map[string]string) []string {
	var flags []string
	for _, name := range sortedKeys(config) {
		k, ok := BrokerKey(name)
		if !ok || k.Flag == "" || CheckBroker(name, config[name]) != nil {
			continue
		}
		v, _ := normalize(k, config[name]) // passed CheckBroker
		flags = append(flags, "--"+k.Flag+"="+v)
	}
	return flags
}

// ParseConnectionOverrides parses max.connections.per.ip.overrides: ip:count[,ip:count...],
// IP addresses only (an IPv6 address in brackets, or bare: the count follows the last colon).
func ParseConnectionOverrides(s string) (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i < 0 {
			return nil, fmt.Errorf("%q: want ip:count", item)
		}
		ip, err := netip.ParseAddr(strings.Trim(item[:i], "[]"))
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not an IP address (host names are not resolved)", item, item[:i])
		}
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the count must be a number ≥ 0", item)
		}
		if _, dup := out[ip.Unmap()]; dup {
			return nil, fmt.Errorf("%q: %s is listed twice", item, ip)
		}
		out[ip.Unmap()] = n
	}
	return out, nil
}

func checkConnectionOverrides(v string) error {
	_, err := ParseConnectionOverrides(v)
	return err
}
