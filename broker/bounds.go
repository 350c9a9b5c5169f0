package broker

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/broker/wire"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

// Bounds are the broker's resource bounds (docs/bounds.md): each a static broker key of
// internal/kafkaconfig with Apache's name (or paddock's own), set from the KafkaCluster's
// spec.config through a flag of the same name with dashes, defaulting to the table's value.
type Bounds struct {
	// SocketRequestMaxBytes caps a request frame (socket.request.max.bytes).
	SocketRequestMaxBytes int
	// QueuedMaxRequestBytes bounds the bytes of requests being read and handled
	// (queued.max.request.bytes; -1 unbounded).
	QueuedMaxRequestBytes int64
	// QueuedMaxResponseBytes bounds the Fetch records held in memory until written
	// (queued.max.response.bytes; -1 unbounded).
	QueuedMaxResponseBytes int64
	// QueuedMaxResponseBytesPerConnection bounds one connection's queued answers
	// (queued.max.response.bytes.per.connection; -1: only the count bound).
	QueuedMaxResponseBytesPerConnection int64
	// MaxConnections, MaxConnectionsPerIP and MaxConnectionsPerIPOverrides cap connections
	// (max.connections, max.connections.per.ip, max.connections.per.ip.overrides).
	MaxConnections               int
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// ConnectionsMaxIdle closes idle connections (connections.max.idle.ms; 0 never).
	ConnectionsMaxIdle time.Duration

	// values are the keys' values as set, by key name: what DescribeConfigs reports as this
	// broker's (the operator may give a bound other than spec.config's: the memory budgets
	// follow the container's memory limit).
	values map[string]string
}

// Values are the bounds' values by key name, as set (nil for Bounds not made by
// DefaultBounds or the flags).
func (b Bounds) Values() map[string]string { return b.values }

// DefaultBounds are the table's defaults.
func DefaultBounds() Bounds {
	var b Bounds
	for _, k := range kafkaconfig.BrokerKeys() {
		if k.Flag != "" {
			if err := b.set(k.Name, k.Default); err != nil {
				panic(fmt.Sprintf("broker: the default of %s: %v", k.Name, err)) // pinned by TestDefaultBoundsAreTheTables
			}
		}
	}
	return b
}

// set sets the bound of key name from its value, checked as the operator checks it.
func (b *Bounds) set(name, value string) error {
	if err := kafkaconfig.CheckBroker(name, value); err != nil {
		return err
	}
	value = strings.TrimSpace(value)
	n, _ := strconv.ParseInt(value, 10, 64) // the numeric keys passed their type check
	switch name {
	case "socket.request.max.bytes":
		b.SocketRequestMaxBytes = int(n)
	case "queued.max.request.bytes":
		b.QueuedMaxRequestBytes = n
	case "queued.max.response.bytes":
		b.QueuedMaxResponseBytes = n
	case "queued.max.response.bytes.per.connection":
		b.QueuedMaxResponseBytesPerConnection = n
	case "max.connections":
		b.MaxConnections = int(n)
	case "max.connections.per.ip":
		b.MaxConnectionsPerIP = int(n)
	case "max.connections.per.ip.overrides":
		b.MaxConnectionsPerIPOverrides, _ = kafkaconfig.ParseConnectionOverrides(value) // checked
	case "connections.max.idle.ms":
		b.ConnectionsMaxIdle = time.Duration(n) * time.Millisecond
	default:
		return fmt.Errorf("%s is not a bound", name)
	}
	if b.values == nil {
		b.values = map[string]string{}
	}
	b.values[name] = value
	return nil
}

// boundFlags declares a flag for every static broker key (Key.Flag), whose value str keeps
// for parseBounds.
func boundFlags(str func(p *string, name, def, usage string)) map[string]*string {
	values := map[string]*string{}
	for _, k := range kafkaconfig.BrokerKeys() {
		if k.Flag != "" {
			values[k.Name] = new(string)
			str(values[k.Name], k.Flag, k.Default, k.Name+": "+k.Doc)
		}
	}
	return values
}

// parseBounds checks and sets every bound from its flag's value.
func parseBounds(values map[string]*string) (Bounds, error) {
	b := DefaultBounds()
	for name, v := range values {
		if err := b.set(name, *v); err != nil {
			k, _ := kafkaconfig.BrokerKey(name)
			return b, fmt.Errorf("--%s: %w", k.Flag, err)
		}
	}
	return b, nil
}

// orUnbounded is n, with -1 (unbounded) as 0, the wire server's "no bound".
func orUnbounded(n int64) int64 { return max(n, 0) }

// requestCost is the share of queued.max.request.bytes a request takes (wire.Server.RequestCost):
// its frame and what decoding and answering it may allocate. A Produce keeps its records in
// the frame (they alias it) and decodes to little. Every other request decodes into structs
// and answers with more — up to decodeAmplification times its frame for the worst crafted
// ones (TestRequestCostCoversWhatHandlingAllocates) — and carries no records, so it is
// refused above otherRequestMaxBytes: one such request costs at most 160 MiB, within the
// default budget.
func requestCost(h wire.Header, frameBytes int) (int64, error) {
	if h.Key == 0 {
		return 2 * int64(frameBytes), nil
	}
	if frameBytes > otherRequestMaxBytes {
		return 0, fmt.Errorf("%w: a request of key %d is %d bytes; requests other than Produce are capped at %d", wire.ErrFrameTooLarge, h.Key, frameBytes, otherRequestMaxBytes)
	}
	return decodeAmplification * int64(frameBytes), nil
}

// decodeAmplification bounds what a request other than Produce allocates, in total, per byte
// of its frame while it is decoded and answered (measured: up to 36× for a Metadata request
// of empty topic names).
const decodeAmplification = 40

// otherRequestMaxBytes caps the frame of every request but Produce: 4 MiB holds a Fetch or an
// OffsetCommit of more than 100,000 partitions, or a Metadata request of 100,000 names.
const otherRequestMaxBytes = 4 << 20
