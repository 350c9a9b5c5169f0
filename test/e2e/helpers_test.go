package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// suite is the shared environment and the cluster every scenario works on.
type suite struct {
	env       *devcluster.Env
	c         client.Client
	namespace string
	name      string
	port      int32
	// podSeeds makes clients bootstrap from the brokers' pod DNS names (seeds) instead of the
	// internal listener's bootstrap Service: the upgrade scenarios start under an operator
	// version that names its Services otherwise.
	podSeeds bool
}

// brokers returns the cluster's Broker objects by id.
func (s *suite) brokers(ctx context.Context) (map[int32]kafkav1alpha1.Broker, error) {
	var list kafkav1alpha1.BrokerList
	if err := s.c.List(ctx, &list, client.InNamespace(s.namespace), client.MatchingLabels{kafkav1alpha1.LabelCluster: s.name}); err != nil {
		return nil, err
	}
	out := map[int32]kafkav1alpha1.Broker{}
	for _, b := range list.Items {
		out[b.Status.ID] = b
	}
	return out, nil
}

func (s *suite) cluster(ctx context.Context) (*kafkav1alpha1.KafkaCluster, error) {
	var kc kafkav1alpha1.KafkaCluster
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, &kc)
	return &kc, err
}

func (s *suite) pod(ctx context.Context, id int32) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.BrokerPodName(s.name, id)}, &pod)
	return &pod, err
}

// nodeReady reports whether node name's Ready condition is True.
func (s *suite) nodeReady(ctx context.Context, name string) (bool, error) {
	n := &corev1.Node{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return false, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// dnsName is broker id's pod DNS name, what its PodDNS listener advertises.
func (s *suite) dnsName(id int32) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", kafkav1alpha1.BrokerPodName(s.name, id), kafkav1alpha1.HeadlessServiceName(s.name),
		s.namespace, devcluster.ClusterDomain)
}

// bootstrapName is the internal listener's bootstrap address by the name the cluster DNS
// answers for it: the cluster also has NodePort listeners, so it is the internal bootstrap
// Service's.
func (s *suite) bootstrapName() string {
	return net.JoinHostPort(kafkav1alpha1.InternalBootstrapServiceName(s.name)+"."+s.namespace+".svc."+devcluster.ClusterDomain, strconv.Itoa(int(s.port)))
}

// seeds are the addresses the scenarios' Kafka clients bootstrap from: bootstrapName, or with
// podSeeds the three brokers' pod DNS names, which every operator version gives them.
func (s *suite) seeds() []string {
	if !s.podSeeds {
		return []string{s.bootstrapName()}
	}
	var seeds []string
	for id := range int32(3) {
		seeds = append(seeds, net.JoinHostPort(s.dnsName(id), strconv.Itoa(int(s.port))))
	}
	return seeds
}

// addr is broker id's Kafka address at its pod IP, for requests to that very broker.
func (s *suite) addr(ctx context.Context, id int32) (string, error) {
	pod, err := s.pod(ctx, id)
	if err != nil {
		return "", err
	}
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("pod of broker %d has no IP", id)
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(s.port))), nil
}

// podAddrs is the three brokers' Kafka addresses at their pod IPs (addr), as seeds.
func (s *suite) podAddrs(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var seeds []string
	for id := range int32(3) {
		addr, err := s.addr(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, addr)
	}
	return seeds
}

// healthy reports whether exactly n brokers are registered, all Serving and Alive.
func (s *suite) healthy(ctx context.Context, n int) (bool, string) {
	brokers, err := s.brokers(ctx)
	if err != nil {
		return false, err.Error()
	}
	kc, err := s.cluster(ctx)
	if err != nil {
		return false, err.Error()
	}
	if len(brokers) != n || int(kc.Status.Counts.Registered) != n {
		return false, fmt.Sprintf("%d Broker objects, %d registered; want %d", len(brokers), kc.Status.Counts.Registered, n)
	}
	for id, b := range brokers {
		if b.Status.State != kafkav1alpha1.BrokerServing || b.Status.Health != kafkav1alpha1.BrokerAlive {
			return false, fmt.Sprintf("broker %d is %s/%s (%s)", id, b.Status.State, b.Status.Health, b.Status.Reason)
		}
	}
	return true, ""
}

// brokerAwayFromManager returns a broker whose node does not run the manager pod, and that
// node.
func (s *suite) brokerAwayFromManager(ctx context.Context, t *testing.T) (int32, string) {
	t.Helper()
	mgr, err := s.env.ManagerPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := range int32(3) {
		pod, err := s.pod(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != mgr.Spec.NodeName {
			return id, pod.Spec.NodeName
		}
	}
	t.Fatalf("every broker runs on %s, the manager's node", mgr.Spec.NodeName)
	return 0, ""
}

// kafka sends one request straight to the broker at addr. It gives up after 10 s: a request
// to a live broker on this machine answers in milliseconds even when the machine is loaded,
// and a scenario that asserts an answer must not fail on a slow one.
func kafka(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// describeCluster asks addr for DescribeCluster v2 and returns IsFenced by broker id.
func describeCluster(ctx context.Context, addr string, includeFenced bool) (map[int32]bool, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.SetVersion(2)
	req.IncludeFencedBrokers = includeFenced
	resp, err := kafka(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.DescribeClusterResponse)
	if r.ErrorCode != 0 {
		return nil, fmt.Errorf("DescribeCluster error code %d", r.ErrorCode)
	}
	out := map[int32]bool{}
	for _, b := range r.Brokers {
		out[b.NodeID] = b.IsFenced
	}
	return out, nil
}

// metadataBrokers asks addr for Metadata (no topics) and returns the broker ids, sorted.
func metadataBrokers(ctx context.Context, addr string) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := kafka(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		ids = append(ids, b.NodeID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// findCoordinator asks addr for group's coordinator.
func findCoordinator(ctx context.Context, addr, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := kafka(ctx, addr, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) > 0 {
		if r.Coordinators[0].ErrorCode != 0 {
			return 0, fmt.Errorf("FindCoordinator %s: error code %d", group, r.Coordinators[0].ErrorCode)
		}
		return r.Coordinators[0].NodeID, nil
	}
	if r.ErrorCode != 0 {
		return 0, fmt.Errorf("FindCoordinator %s: error code %d", group, r.ErrorCode)
	}
	return r.NodeID, nil
}

var kcatBrokersLine = regexp.MustCompile(`(?m)^\s*(\d+) brokers:`)

// kcatBrokers runs `kcat -L -b addr` and returns how many brokers it lists.
func kcatBrokers(ctx context.Context, addr string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-L", "-b", addr, "-m", "5").CombinedOutput()
	if err != nil {
		return 0, string(out), fmt.Errorf("kcat -L: %w", err)
	}
	m := kcatBrokersLine.FindSubmatch(out)
	if m == nil {
		return 0, string(out), fmt.Errorf("kcat -L printed no broker count")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n, string(out), nil
}

// scrapeMetrics is the sum of the series on the broker's /metrics at ip (its health port)
// that match says yes to; match gets the series with its labels, as the exposition prints it.
func scrapeMetrics(ctx context.Context, ip string, match func(series string) bool) (float64, error) {
	url := fmt.Sprintf("http://%s/metrics", net.JoinHostPort(ip, strconv.Itoa(int(kafkav1alpha1.HealthPort))))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var total float64
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || !match(f[0]) {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", sc.Text(), err)
		}
		total += v
	}
	return total, sc.Err()
}

// podUIDs is the UID of each of the three broker pods, to tell later when each was replaced.
func (s *suite) podUIDs(ctx context.Context, t *testing.T) map[int32]string {
	t.Helper()
	uids := map[int32]string{}
	for id := range int32(3) {
		pod, err := s.pod(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		uids[id] = string(pod.UID)
	}
	return uids
}

// createTopic creates topic with kadm. A failure is logged and the request sent again for up to
// 30 s, as a client's own retries would — once a fresh-clone run saw one CreateTopics fail
// right after the operator-restart scenario and the reason went unrecorded — then fails the
// test with every error seen.
func createTopic(ctx context.Context, t *testing.T, adm *kadm.Client, partitions int32, topic string) {
	t.Helper()
	var errs []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		if err == nil || (len(errs) > 0 && errors.Is(err, kerr.TopicAlreadyExists)) { // an earlier attempt created it
			return
		}
		errs = append(errs, err.Error())
		t.Logf("create %s: %v (attempt %d)", topic, err, len(errs))
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("create %s: every attempt failed: %s", topic, strings.Join(errs, "; "))
		}
		time.Sleep(time.Second)
	}
}

// kafkaTopic is the cluster's KafkaTopic serving Kafka topic name, found as the brokers and
// the operator find it (spec.cluster and the Kafka name), whatever its object is called: a
// topic a client created is "<cluster>.<name>" (topicname.ObjectNameIn), one applied with
// kubectl has the name it was given. A topic with no object answers a NotFound error.
func (s *suite) kafkaTopic(ctx context.Context, name string) (*kafkav1alpha1.KafkaTopic, error) {
	var list kafkav1alpha1.KafkaTopicList
	if err := s.c.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if kt := &list.Items[i]; kt.Spec.Cluster == s.name && kt.KafkaName() == name {
			return kt, nil
		}
	}
	return nil, apierrors.NewNotFound(kafkav1alpha1.GroupVersion.WithResource("kafkatopics").GroupResource(), name)
}

// deleteTopicAndWait deletes topic and waits until its KafkaTopic is gone.
func (s *suite) deleteTopicAndWait(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	if _, err := adm.DeleteTopic(context.WithoutCancel(ctx), topic); err != nil {
		t.Errorf("delete %s: %v", topic, err)
		return
	}
	testkit.EventuallyDetail(t, "the topic's KafkaTopic gone", func() (bool, string) {
		_, err := s.kafkaTopic(ctx, topic)
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
}
