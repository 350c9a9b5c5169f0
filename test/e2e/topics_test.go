package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// 10. Topics: a topic created with kadm is listed by `kubectl get kafkatopics` Ready, with its
// leaders spread over the three brokers; kill -9 of one broker gives its partitions new
// leaders (epoch + 1) within the session timeout + 30 s; deleting the topic with kadm removes
// it and its KafkaTopic.
func topics(ctx context.Context, t *testing.T, s *suite) {
	const topic, partitions = "e2e-orders", 6
	seeds := s.podAddrs(ctx, t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created := time.Now()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("kadm create %s: %v", topic, err)
	}
	measure(t, "10 topics", "kadm CreateTopics answered (leaders assigned)", time.Since(created))

	var kt *kafkav1alpha1.KafkaTopic
	testkit.EventuallyDetail(t, "the topic Ready with leaders on all three brokers", func() (bool, string) {
		var err error
		if kt, err = s.kafkaTopic(ctx, topic); err != nil {
			return false, err.Error()
		}
		per := leadersPerBroker(kt)
		return meta.IsStatusConditionTrue(kt.Status.Conditions, kafkav1alpha1.ConditionReady) && len(per) == 3 &&
			per[0] == 2 && per[1] == 2 && per[2] == 2, fmt.Sprintf("leaders per broker %v", per)
	})
	row, err := topicTableRow(ctx, s, topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get kafkatopics: %v", row)
	if row["Ready"] != "True" || row["Cluster"] != s.name || row["Topic"] != topic || row["Partitions"] != fmt.Sprint(partitions) {
		t.Errorf("kubectl get kafkatopics row %v, want cluster %s, topic %s, %d partitions, Ready True", row, s.name, topic, partitions)
	}

	// kill -9 a broker; it stays down until its partitions have moved.
	const victim = int32(2)
	before := map[int32]kafkav1alpha1.PartitionStatus{}
	for _, p := range kt.Status.Partitions {
		before[p.Partition] = p
	}
	pod := kafkav1alpha1.BrokerPodName(s.name, victim)
	pid := readPID(t, s.env, s.namespace, pod)
	s.env.HoldRestarts(s.namespace, pod, true)
	defer s.env.HoldRestarts(s.namespace, pod, false)
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The partitions move once the registry declares the broker Dead: at once when its
	// container is reported terminated (death seen, docs/registry.md), at its Lease's expiry
	// at the latest. 30 s covers a loaded machine's reconciles and informers; every slower
	// path (a periodic resync, the registry's 5 min lastSeen refresh) takes minutes. The delay
	// is printed.
	bound := kc.Spec.SessionTimeout() + 30*time.Second
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyDetail(t, "the killed broker's partitions on new leaders", func() (bool, string) {
		now, err := s.kafkaTopic(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range now.Status.Partitions {
			was := before[p.Partition]
			switch {
			case p.Leader == victim:
				return false, fmt.Sprintf("partition %d still on broker %d", p.Partition, victim)
			case was.Leader == victim && p.LeaderEpoch != was.LeaderEpoch+1:
				t.Fatalf("partition %d moved at epoch %d, want %d", p.Partition, p.LeaderEpoch, was.LeaderEpoch+1)
			case was.Leader != victim && p != was:
				t.Fatalf("partition %d was on broker %d and changed: %+v → %+v", p.Partition, was.Leader, was, p)
			}
		}
		return true, ""
	})
	took := time.Since(killed)
	measure(t, "10 topics", "kill -9 → its partitions on new leaders", took)
	if took > bound {
		t.Errorf("kill -9 → new leaders took %s, want at most the session timeout + 30 s (%s)", took, bound)
	}
	s.env.HoldRestarts(s.namespace, pod, false)
	testkit.Within(t, "the killed broker back", 2*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })

	deleted := time.Now()
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("kadm delete %s: %v", topic, err)
	}
	testkit.EventuallyDetail(t, "the deleted topic's KafkaTopic gone", func() (bool, string) {
		_, err := s.kafkaTopic(ctx, topic)
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	measure(t, "10 topics", "kadm DeleteTopics → KafkaTopic gone (unassigned, data removed)", time.Since(deleted))
}

// leadersPerBroker counts the partitions each broker leads.
func leadersPerBroker(kt *kafkav1alpha1.KafkaTopic) map[int32]int {
	out := map[int32]int{}
	for _, p := range kt.Status.Partitions {
		out[p.Leader]++
	}
	return out
}

// topicTableRow is what `kubectl get kafkatopics` prints for topic: the server-side table's
// cells by column name.
func topicTableRow(ctx context.Context, s *suite, topic string) (map[string]string, error) {
	cfg := s.env.RestConfig()
	gv := kafkav1alpha1.GroupVersion
	cfg.APIPath, cfg.GroupVersion = "/apis", &gv
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := rc.Get().AbsPath("/apis", gv.Group, gv.Version, "namespaces", s.namespace, "kafkatopics").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get the kafkatopics table: %w", err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, err
	}
	for _, r := range table.Rows {
		cells := map[string]string{}
		for i, c := range table.ColumnDefinitions {
			cells[c.Name] = strings.TrimSpace(fmt.Sprint(r.Cells[i]))
		}
		if cells["Name"] == topicname.ObjectNameIn(s.name, topic) {
			return cells, nil
		}
	}
	return nil, fmt.Errorf("kubectl get kafkatopics lists no %s", topic)
}
