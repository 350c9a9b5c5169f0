package kafkaconfig

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// TopicKey returns the topic key called name.
func TopicKey(name string) (Key, bool) { return lookup(topicKeys, name) }

// BrokerKey returns the broker key called name.
func BrokerKey(name string) (Key, bool) { return lookup(brokerKeys, name) }

// TopicKeys and BrokerKeys return the tables, sorted by name. The slices are copies.
func TopicKeys() []Key  { return slices.Clone(topicKeys) }
func BrokerKeys() []Key { return slices.Clone(brokerKeys) }

func lookup(table []Key, name string) (Key, bool) {
	i, ok := slices.BinarySearchFunc(table, name, func(k Key, n string) int { return strings.Compare(k.Name, n) })
	if !ok {
		return Key{}, false
	}
	return table[i], true
}

// ErrUnknownKey is wrapped by the error of a key the table does not have.
var ErrUnknownKey = errors.New("unknown config key")

// CheckTopic checks one topic key and value: the key exists, the value parses as its type
// and passes its check. The error names the key and says why, for a client or a condition.
func CheckTopic(name, value string) error { return check(topicKeys, "topic", name, value) }

// CheckBroker checks one broker (KafkaCluster spec.config) key and value.
func CheckBroker(name, value string) error { return check(brokerKeys, "broker", name, value) }

func check(table []Key, kind, name, value string) error {
	k, ok := lookup(table, name)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q is not a %s config paddock knows", ErrUnknownKey, name, kind)
	case k.ReadOnly:
		return fmt.Errorf("%s is read-only", name)
	}
	v, err := normalize(k, value)
	if err != nil {
		return fmt.Errorf("invalid value %q for %s: %w", value, name, err)
	}
	if k.check != nil {
		if err := k.check(v); err != nil {
			return fmt.Errorf("invalid value %q for %s: %w", value, name, err)
		}
	}
	return nil
}

// normalize parses value as k's type and returns it the way Kafka prints it: trimmed,
// booleans lower case, lists joined with ",".
func normalize(k Key, value string) (string, error) {
	v := strings.TrimSpace(value)
	switch k.Type {
	case Boolean:
		switch strings.ToLower(v) {
		case "true", "false":
			return strings.ToLower(v), nil
		}
		return "", errors.New("expected true or false")
	case Int:
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return "", errors.New("expected a 32-bit integer")
		}
		return strconv.FormatInt(n, 10), nil
	case Long:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", errors.New("expected a 64-bit integer")
		}
		return strconv.FormatInt(n, 10), nil
	case Double:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", errors.New("expected a number")
		}
		return v, nil
	case List:
		return strings.Join(SplitList(v), ","), nil
	}
	return v, nil
}

// SplitList splits a comma-separated list value the way Kafka reads a LIST config: items
// trimmed, empty ones dropped.
func SplitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Problem is one entry of a config map that is not applied.
type Problem struct {
	Key string
	Err error
}

func (p Problem) String() string { return p.Err.Error() }

// CheckTopicConfig checks every entry of a topic config map, sorted by key.
func CheckTopicConfig(cfg map[string]string) []Problem { return checkAll(topicKeys, "topic", cfg) }

// CheckBrokerConfig checks every entry of a KafkaCluster spec.config, sorted by key, then the
// rules between them (ClusterConflicts).
func CheckBrokerConfig(cfg map[string]string) []Problem {
	return append(checkAll(brokerKeys, "broker", cfg), ClusterConflicts(cfg)...)
}

func checkAll(table []Key, kind string, cfg map[string]string) []Problem {
	var out []Problem
	for _, name := range sortedKeys(cfg) {
		if err := check(table, kind, name, cfg[name]); err != nil {
			out = append(out, Problem{Key: name, Err: err})
		}
	}
	return out
}

// TopicConflicts checks the rules between a topic's keys, on its effective values (the
// topic's valid entries, else the cluster's through the keys' synonyms, else the defaults),
// as Apache's LogConfig.validateValues does when a topic is created or altered:
// min.compaction.lag.ms may not be above max.compaction.lag.ms. The message is Apache's.
// Entries that fail their own check are CheckTopicConfig's problems and not applied, so they
// take no part here.
func TopicConflicts(topic, cluster map[string]string) []Problem {
	lo := describeTopicKey(mustKey(topicKeys, "min.compaction.lag.ms"), topic, cluster).Value.Value
	hi := describeTopicKey(mustKey(topicKeys, "max.compaction.lag.ms"), topic, cluster).Value.Value
	if atoi(lo) > atoi(hi) {
		return []Problem{{Key: "min.compaction.lag.ms",
			Err: fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%s) > max.compaction.lag.ms (%s)", lo, hi)}}
	}
	return nil
}

// ClusterConflicts checks the rules between a KafkaCluster spec.config's keys, on their
// valid values over the defaults: log.cleaner.min.compaction.lag.ms may not be above
// log.cleaner.max.compaction.lag.ms (Apache validates the broker's log defaults as a topic's).
func ClusterConflicts(cluster map[string]string) []Problem {
	lo, hi := brokerValue("log.cleaner.min.compaction.lag.ms", cluster), brokerValue("log.cleaner.max.compaction.lag.ms", cluster)
	if atoi(lo) > atoi(hi) {
		return []Problem{{Key: "log.cleaner.min.compaction.lag.ms",
			Err: fmt.Errorf("conflict config setting log.cleaner.min.compaction.lag.ms (%s) > log.cleaner.max.compaction.lag.ms (%s)", lo, hi)}}
	}
	return nil
}

// brokerValue is a broker key's valid value in cluster, else its default.
func brokerValue(name string, cluster map[string]string) string {
	if v, ok := valid(brokerKeys, name, cluster); ok {
		return v
	}
	return mustKey(brokerKeys, name).Default
}

// mustKey is the table's key called name, which the table is known to have.
func mustKey(table []Key, name string) Key {
	k, ok := lookup(table, name)
	if !ok {
		panic("kafkaconfig: no key " + name)
	}
	return k
}

// Summary joins problems into one sentence for a condition message.
func Summary(problems []Problem) string {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Source is where a described value comes from, numbered as Kafka's DescribeConfigs (v1+)
// numbers config sources.
type Source int8

const (
	// SourceTopic: the topic's own config (KafkaTopic spec.config).
	SourceTopic Source = 1
	// SourceClusterDefault: the cluster-wide broker config (KafkaCluster spec.config), which
	// Kafka calls a dynamic default broker config: it applies to every broker and can change
	// at run time.
	SourceClusterDefault Source = 3
	// SourceStatic: fixed at broker start (broker.id).
	SourceStatic Source = 4
	// SourceDefault: Apache's default.
	SourceDefault Source = 5
)

// Value is one described value: the value and where it comes from. Null is true for a key
// with no value at all (an Apache default of null, such as log.retention.ms).
type Value struct {
	Name   string
	Value  string
	Null   bool
	Source Source
}

// Entry is one described config entry: its key, effective value and, in precedence order,
// every source that sets it (Kafka's synonyms; the first one is the effective value).
type Entry struct {
	Key      Key
	Value    Value
	Synonyms []Value
}

// DescribeTopic describes every topic key for a topic whose spec.config is topic, in a
// cluster whose spec.config is cluster. Invalid entries of either are skipped, as they are
// not applied.
func DescribeTopic(topic, cluster map[string]string) []Entry {
	out := make([]Entry, 0, len(topicKeys))
	for _, k := range topicKeys {
		out = append(out, describeTopicKey(k, topic, cluster))
	}
	return out
}

func describeTopicKey(k Key, topic, cluster map[string]string) Entry {
	var syns []Value
	if v, ok := valid(topicKeys, k.Name, topic); ok {
		syns = append(syns, Value{Name: k.Name, Value: v, Source: SourceTopic})
	}
	for _, s := range k.Synonyms {
		if v, ok := valid(brokerKeys, s.Name, cluster); ok {
			syns = append(syns, Value{Name: s.Name, Value: scale(v, s.Scale), Source: SourceClusterDefault})
		}
	}
	// Apache lists the default of the first synonym that has one, under that synonym's
	// name (log.retention.hours=168 for retention.ms), already scaled to the topic's unit.
	for _, s := range k.Synonyms {
		if bk, ok := BrokerKey(s.Name); ok && bk.HasDefault {
			syns = append(syns, Value{Name: s.Name, Value: scale(bk.Default, s.Scale), Source: SourceDefault})
			break
		}
	}
	e := Entry{Key: k, Synonyms: syns}
	if len(syns) > 0 {
		e.Value = syns[0]
		e.Value.Name = k.Name
	} else {
		e.Value = Value{Name: k.Name, Value: k.Default, Null: !k.HasDefault, Source: SourceDefault}
	}
	return e
}

// DescribeBroker describes broker brokerID: every broker key, with the cluster's valid
// spec.config values over Apache's defaults, and broker.id fixed. running holds the values
// the broker was started with for the static keys (Key.Flag): each is reported as it runs —
// from spec.config or the default when it is theirs, else as static (the operator gave the
// broker a value of its own: the memory budgets follow the container's memory limit).
func DescribeBroker(brokerID int32, cluster, running map[string]string) []Entry {
	out := make([]Entry, 0, len(brokerKeys))
	for _, k := range brokerKeys {
		e := Entry{Key: k}
		v, ok := valid(brokerKeys, k.Name, cluster)
		r, started := running[k.Name]
		// runsOther: a static key the broker runs with a value other than spec.config's.
		runsOther := k.Flag != "" && started && (!ok || r != v)
		switch {
		case k.Name == "broker.id":
			e.Value = Value{Name: k.Name, Value: strconv.Itoa(int(brokerID)), Source: SourceStatic}
		case runsOther && r != k.Default:
			e.Value = Value{Name: k.Name, Value: r, Source: SourceStatic}
		case runsOther:
			e.Value = Value{Name: k.Name, Value: k.Default, Source: SourceDefault}
		case ok:
			e.Value = Value{Name: k.Name, Value: v, Source: SourceClusterDefault}
		default:
			e.Value = Value{Name: k.Name, Value: k.Default, Null: !k.HasDefault, Source: SourceDefault}
		}
		e.Synonyms = []Value{e.Value}
		if e.Value.Source != SourceDefault && k.Name != "broker.id" && k.HasDefault {
			e.Synonyms = append(e.Synonyms, Value{Name: k.Name, Value: k.Default, Source: SourceDefault})
		}
		out = append(out, e)
	}
	return out
}

// DescribeClusterDefaults describes the cluster-wide broker configs that are set (Kafka's
// answer for the broker resource ""): the valid entries of the cluster's spec.config.
func DescribeClusterDefaults(cluster map[string]string) []Entry {
	var out []Entry
	for _, name := range sortedKeys(cluster) {
		k, known := BrokerKey(name)
		if v, ok := valid(brokerKeys, name, cluster); known && ok {
			val := Value{Name: name, Value: v, Source: SourceClusterDefault}
			out = append(out, Entry{Key: k, Value: val, Synonyms: []Value{val}})
		}
	}
	return out
}

// valid is cfg[name] normalized, when it is set and passes its check.
func valid(table []Key, name string, cfg map[string]string) (string, bool) {
	raw, ok := cfg[name]
	if !ok {
		return "", false
	}
	k, known := lookup(table, name)
	if !known || check(table, "", name, raw) != nil {
		return "", false
	}
	v, _ := normalize(k, raw)
	return v, true
}

// scale multiplies a decimal value by factor (hours or minutes to milliseconds).
func scale(v string, factor int64) string {
	if factor == 1 {
		return v
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return v
	}
	return strconv.FormatInt(n*factor, 10)
}
