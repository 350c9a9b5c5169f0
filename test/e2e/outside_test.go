package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// nodesListener is the extra NodePort listener the e2e cluster has besides the sample's: no
// template, so each broker advertises its node's InternalIP (reachable inside the private
// network) and its own nodePort — the path that reads Nodes under the broker's real RBAC.
const nodesListener = "nodes"

// kubectlBinary is the kubectl the suite runs from the host's network: $KUBECTL, else the
// one on PATH.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	k, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is not installed: run `make kubectl` (it builds kubectl into bin/) and pass KUBECTL=bin/kubectl-<version>; the e2e suite does not run without it")
	}
	return k
}

var kcatBrokerAt = regexp.MustCompile(`(?m)^\s*broker (\d+) at (\S+)`)

// hostKcat runs `kcat -L -b addr` in the host's network and returns the advertised address of
// each broker it lists; with a non-empty shell (Env.ShellPath), through it, as a person does
// at the host terminal to reach inside.
func hostKcat(ctx context.Context, shell, addr string) (map[int32]string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	argv := []string{"kcat", "-L", "-b", addr, "-m", "5"}
	if shell != "" {
		argv = append([]string{shell}, argv...)
	}
	out, err := devcluster.HostCommand(ctx, []string{"PATH=" + os.Getenv("PATH")}, argv[0], argv[1:]...)
	if err != nil {
		return nil, string(out), err
	}
	got := map[int32]string{}
	for _, m := range kcatBrokerAt.FindAllStringSubmatch(string(out), -1) {
		id, _ := strconv.Atoi(m[1])
		got[int32(id)] = strings.TrimSuffix(m[2], " (controller)")
	}
	return got, string(out), nil
}

// nodePorts returns each broker's own nodePort of listener.
func (s *suite) nodePorts(ctx context.Context, listener string) (map[int32]int32, error) {
	out := map[int32]int32{}
	for id := range int32(3) {
		svc := &corev1.Service{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.BrokerServiceName(s.name, id)}, svc); err != nil {
			return nil, err
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == listener {
				out[id] = p.NodePort
			}
		}
	}
	return out, nil
}

// requestCount is broker id's paddock_broker_requests_total for api, from its /metrics.
func (s *suite) requestCount(ctx context.Context, id int32, api string) (float64, error) {
	pod, err := s.pod(ctx, id)
	if err != nil {
		return 0, err
	}
	return scrapeMetrics(ctx, pod.Status.PodIP, func(series string) bool {
		return strings.HasPrefix(series, `paddock_broker_requests_total{api="`+api+`"`)
	})
}

// 9. From outside: from the host's network — outside the private namespace, where a person's
// terminal is — kubectl works with the kubeconfig paddock dev writes, and kcat and a franz-go
// client bootstrap through the external listener's nodePort and reach every broker at the
// address it advertises (the host address and its own nodePort). Every broker pod is then
// deleted and recreated with new pod IPs: the same host bootstrap still lists 3 brokers at
// the same addresses. Inside, the internal listener bootstraps through the bootstrap
// Service's ClusterIP, and the "nodes" listener advertises each broker's node.
//
// Produce and consume through the external listener are not tested here (scenarios 11 and 12
// produce and consume through the internal listener); Metadata, DescribeCluster and
// ApiVersions round trips stand in for them.
func fromOutside(ctx context.Context, t *testing.T, s *suite) {
	kubectl := kubectlBinary(t)
	bootstrap, err := s.env.HostNodePortAddress(ctx, s.namespace, kafkav1alpha1.BootstrapServiceName(s.name), devcluster.SampleExternalListener)
	if err != nil {
		t.Fatal(err)
	}
	clusterIP, err := s.env.ServiceAddress(ctx, s.namespace, kafkav1alpha1.InternalBootstrapServiceName(s.name), devcluster.SampleInternalListener)
	if err != nil {
		t.Fatal(err)
	}
	external, err := s.nodePorts(ctx, devcluster.SampleExternalListener)
	if err != nil {
		t.Fatal(err)
	}
	wantExternal := map[int32]string{}
	for id, p := range external {
		wantExternal[id] = net.JoinHostPort(s.env.HostAddress(), strconv.Itoa(int(p)))
	}

	check := func(t *testing.T, round string) {
		started := time.Now()
		out, err := devcluster.HostCommand(ctx, []string{"KUBECONFIG=" + s.env.KubeconfigPath(), "HOME=" + t.TempDir()},
			kubectl, "get", "brokers.kafka.paddock.dev", "-n", s.namespace, "-o", "name")
		if err != nil || len(strings.Fields(string(out))) != 3 {
			t.Fatalf("%s: kubectl get brokers from the host: %v\n%s", round, err, out)
		}
		measure(t, "9 from outside", round+": kubectl get brokers from the host", time.Since(started))

		testkit.EventuallyDetail(t, round+": kcat from the host to list every broker at its host address and own nodePort", func() (bool, string) {
			got, out, err := hostKcat(ctx, "", bootstrap)
			if err != nil || len(got) != 3 {
				return false, fmt.Sprintf("%v\n%s", err, out)
			}
			for id, want := range wantExternal {
				if got[id] != want {
					return false, fmt.Sprintf("broker %d at %s, want %s\n%s", id, got[id], want, out)
				}
			}
			return true, ""
		})

		// A franz-go client in the host's network: bootstrap, then one connection to each
		// broker at the address Metadata gave it, which must reach that very broker.
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.Dialer(devcluster.HostDial), kgo.RequestRetries(2))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		meta, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, cl)
		if err != nil || len(meta.Brokers) != 3 {
			t.Fatalf("%s: franz-go Metadata from the host: %+v %v", round, meta, err)
		}
		for _, b := range meta.Brokers {
			before, err := s.requestCount(ctx, b.NodeID, "DescribeCluster")
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				req := kmsg.NewPtrDescribeClusterRequest()
				if _, err := cl.Broker(int(b.NodeID)).Request(mctx, req); err != nil {
					t.Fatalf("%s: DescribeCluster to broker %d at %s:%d from the host: %v", round, b.NodeID, b.Host, b.Port, err)
				}
			}
			if after, err := s.requestCount(ctx, b.NodeID, "DescribeCluster"); err != nil || after-before < 3 {
				t.Fatalf("%s: broker %d answered %v DescribeCluster requests sent to its advertised %s:%d (err %v), want 3",
					round, b.NodeID, after-before, b.Host, b.Port, err)
			}
		}
		if _, err := cl.Broker(0).Request(mctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Fatalf("%s: ApiVersions from the host: %v", round, err)
		}

		// Inside: the bootstrap Service's ClusterIP serves the internal listener (pod DNS
		// names), and the nodes listener names each broker's node and own nodePort.
		ids, err := metadataBrokers(ctx, clusterIP)
		if err != nil || !slices.Equal(ids, []int32{0, 1, 2}) {
			t.Fatalf("%s: Metadata through the bootstrap Service %s: %v %v", round, clusterIP, ids, err)
		}
		nodes, err := s.nodePorts(ctx, nodesListener)
		if err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyDetail(t, round+": every broker's nodes listener at its node's InternalIP and own nodePort", func() (bool, string) {
			kc, err := s.cluster(ctx)
			if err != nil {
				return false, err.Error()
			}
			for _, row := range kc.Status.Brokers {
				pod, err := s.pod(ctx, row.ID)
				if err != nil {
					return false, err.Error()
				}
				addr, ok := row.Address(nodesListener)
				if !ok || addr.Host != pod.Status.HostIP || addr.Port != nodes[row.ID] {
					return false, fmt.Sprintf("broker %d on %s (%s) advertises %+v on %s, want %s:%d",
						row.ID, pod.Spec.NodeName, pod.Status.HostIP, addr, nodesListener, pod.Status.HostIP, nodes[row.ID])
				}
			}
			return true, ""
		})
	}
	t.Run("before", func(t *testing.T) { check(t, "before") })

	before := map[int32]string{}
	for id := range int32(3) {
		pod, err := s.pod(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = pod.Status.PodIP
		if err := s.c.Delete(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	testkit.Within(t, "three new broker pods with new IPs, Serving and Alive", 3*time.Minute, func() (bool, string) {
		for id := range int32(3) {
			pod, err := s.pod(ctx, id)
			if err != nil || pod.Status.PodIP == "" || pod.Status.PodIP == before[id] || pod.DeletionTimestamp != nil {
				return false, fmt.Sprintf("broker %d's pod not recreated yet", id)
			}
		}
		return s.healthy(ctx, 3)
	})
	measure(t, "9 from outside", "every broker pod deleted → 3 Serving/Alive with new pod IPs", time.Since(deleted))
	t.Run("after every pod was recreated", func(t *testing.T) { check(t, "after") })
}
