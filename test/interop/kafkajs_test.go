package interop

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// jsRecord is a record as js/interop.js reads and prints it ([]byte fields are base64 in
// JSON); headers are [key, value] pairs in order.
type jsRecord struct {
	Partition int32       `json:"partition"`
	Offset    string      `json:"offset"`
	Key       []byte      `json:"key"`
	Value     []byte      `json:"value"`
	Headers   [][2][]byte `json:"headers"`
}

// TestKafkajsAdminProducerAndConsumer runs js/interop.js: the kafkajs admin client creates
// the topic, an idempotent producer (acks=all) writes the records, the admin client reads the
// offsets, a consumer group reads everything back and commits, and the admin client reads the
// group's committed offsets.
func TestKafkajsAdminProducerAndConsumer(t *testing.T) {
	checkKafkajs(t, newCluster(t), "kafkajs", "interop-kafkajs", "")
}

// checkKafkajs runs js/interop.js against addrs on topic (3 partitions, created by the
// script's admin client) with consumer group group and checks everything it reports;
// security is the script's INTEROP_SECURITY ("" for plaintext).
func checkKafkajs(t *testing.T, addrs []string, topic, group, security string) {
	t.Helper()
	node := requireKafkajs(t)
	const partitions = 3
	wrote := testRecords(topic, 120, true)
	in := make([]jsRecord, len(wrote))
	for i, r := range wrote {
		in[i] = jsRecord{Key: r.Key, Value: r.Value, Headers: [][2][]byte{}}
		for _, h := range r.Headers {
			in[i].Headers = append(in[i].Headers, [2][]byte{[]byte(h.Key), []byte(h.Value)})
		}
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), node, filepath.Join("js", "interop.js"), strings.Join(addrs, ","), topic, strconv.Itoa(partitions), group)
	cmd.Stdin = bytes.NewReader(stdin)
	if security != "" {
		cmd.Env = append(os.Environ(), "INTEROP_SECURITY="+security)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node js/interop.js: %v\n%s", err, stderr.Bytes())
	}
	var res struct {
		Produced []jsRecord `json:"produced"`
		Offsets  []struct {
			Partition int32  `json:"partition"`
			Low       string `json:"low"`
			High      string `json:"high"`
		} `json:"offsets"`
		Consumed []jsRecord `json:"consumed"`
		Commits  []struct {
			Partition int32  `json:"partition"`
			Offset    string `json:"offset"`
		} `json:"commits"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("js/interop.js output: %v\n%s", err, out)
	}

	// The admin client's topic is what the brokers serve.
	if security == "" {
		waitLeaders(t, addrs, topic, partitions)
	}
	if len(res.Produced) != len(wrote) {
		t.Fatalf("kafkajs acknowledged %d of %d records", len(res.Produced), len(wrote))
	}
	perPartition := map[int32]int64{}
	for i, p := range res.Produced {
		if p.Partition != int32(i%partitions) {
			t.Fatalf("record %d acknowledged on partition %d, sent to %d", i, p.Partition, i%partitions)
		}
		wrote[i].Partition, wrote[i].Offset = p.Partition, parseOffset(t, p.Offset)
		perPartition[p.Partition]++
	}
	if len(res.Offsets) != partitions {
		t.Errorf("admin fetchTopicOffsets: %+v, want %d partitions", res.Offsets, partitions)
	}
	for _, o := range res.Offsets {
		if parseOffset(t, o.Low) != 0 || parseOffset(t, o.High) != perPartition[o.Partition] {
			t.Errorf("admin fetchTopicOffsets partition %d: low %s high %s, want 0 and %d", o.Partition, o.Low, o.High, perPartition[o.Partition])
		}
	}
	// The consumer group committed everything it read (OffsetCommit, read back with
	// OffsetFetch by the admin client).
	if len(res.Commits) != partitions {
		t.Errorf("admin fetchOffsets: %+v, want %d partitions", res.Commits, partitions)
	}
	for _, c := range res.Commits {
		if parseOffset(t, c.Offset) != perPartition[c.Partition] {
			t.Errorf("group committed offset %s on partition %d, want %d", c.Offset, c.Partition, perPartition[c.Partition])
		}
	}
	var read []record
	for _, c := range res.Consumed {
		r := record{Partition: c.Partition, Offset: parseOffset(t, c.Offset), Key: c.Key, Value: c.Value}
		for _, h := range c.Headers {
			r.Headers = append(r.Headers, header{Key: string(h[0]), Value: string(h[1])})
		}
		read = append(read, r)
	}
	checkReadBack(t, wrote, read)
}

func parseOffset(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("offset %q: %v", s, err)
	}
	return n
}

// kafkajsProduceOne runs js/produce_one.js with security (INTEROP_SECURITY), connecting from
// local address from ("": any): one kafkajs record to topic. It returns whether it was
// acknowledged and, when not, the kafkajs error's name, Kafka error type and message.
func kafkajsProduceOne(t *testing.T, addrs []string, topic, security, from string) (acknowledged bool, name, typ, message string) {
	t.Helper()
	cmd := exec.CommandContext(testCtx(t), requireKafkajs(t), filepath.Join("js", "produce_one.js"), strings.Join(addrs, ","), topic)
	cmd.Env = append(os.Environ(), "INTEROP_SECURITY="+security, "INTEROP_LOCAL_ADDRESS="+from)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		Acknowledged         bool
		Error, Type, Message string
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil {
		t.Fatalf("node js/produce_one.js: %v %v, %s\n%s", err, jerr, out, stderr.Bytes())
	}
	return res.Acknowledged, res.Error, res.Type, res.Message
}

// kafkajsRefused is kafkajsProduceOne that must be refused: the kafkajs error's name and
// message.
func kafkajsRefused(t *testing.T, addrs []string, topic, security, from string) (name, message string) {
	t.Helper()
	acked, name, _, message := kafkajsProduceOne(t, addrs, topic, security, from)
	if acked {
		t.Fatalf("kafkajs produced to %s", topic)
	}
	return name, message
}

// requireKafkajs fails the test unless node and kafkajs (in js/node_modules) are installed,
// and returns node's path.
func requireKafkajs(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run `make kafkajs` (hack/install-kafkajs.sh installs nodejs and npm, then kafkajs with npm ci)")
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "kafkajs", "package.json")); err != nil {
		t.Fatal("kafkajs is not installed in test/interop/js: run `make kafkajs` (npm ci from the committed package-lock.json)")
	}
	return node
}
