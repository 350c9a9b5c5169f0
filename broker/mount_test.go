package broker

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// mountInfoWithDataDirOn is a real /proc/self/mountinfo (a node's root and the kubelet's
// mounts) with the data directory mounted from an NFS server with nfsOptions (the kernel's
// super options, as a Linux client shows them).
func mountInfoWithDataDirOn(dataDir, nfsOptions string) string {
	return strings.Join([]string{
		"22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro",
		"25 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw",
		"3417 22 0:212 / " + dataDir + " rw,relatime - nfs4 10.20.0.43:/data/k8s/nfs_share/pvc-2108 " + nfsOptions,
	}, "\n")
}

// runMountBroker runs a broker with a data directory on the mount mountinfo describes, led
// partition t/0 in its view, and returns it with its health address.
func runMountBroker(t *testing.T, mountinfo func(dataDir string) string) (*Broker, string) {
	t.Helper()
	dataDir := t.TempDir()
	cfg := Config{
		Cluster:     "c",
		Listeners:   []cluster.ListenerSpec{{Name: "kafka", Port: int32(testkit.FreePort(t)), Host: "127.0.0.1"}},
		HealthPort:  testkit.FreePort(t),
		BindAddress: "127.0.0.1", DataDir: dataDir,
		Identity: cluster.Identity{ID: 0, Pod: "c-broker-0", Namespace: "ns"},
	}
	view := cluster.NewMemoryView(cluster.Snapshot{
		ClusterID: testClusterID,
		Brokers:   []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}},
		Topics:    []cluster.Topic{{Name: "t", ID: [16]byte{4, 2}, Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}},
	})
	b := NewBroker(cfg, view, testr.New(t))
	b.MountInfo = func() (string, error) { return mountinfo(dataDir), nil }
	listening := make(chan string, 1)
	b.OnListening = func(_ []net.Addr, health net.Addr) { listening <- health.String() }
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- b.Run(ctx, make(chan os.Signal)) }()
	t.Cleanup(func() { cancel(); t.Logf("broker stopped: %v", <-result) })
	select {
	case health := <-listening:
		return b, health
	case err := <-result:
		t.Fatalf("broker stopped at start: %v", err)
	}
	return nil, ""
}

func readyz(t *testing.T, health string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestABrokerOnASoftNFSMountRefusesToServeAndSaysWhy: a data volume mounted soft (a call that
// times out fails although the server may still apply it) cannot keep the fence's rules: the
// broker leads nothing, is unhealthy (its Lease says so), and /readyz is 503 naming the
// option. The same volume mounted hard, NFS 4.1, is served.
func TestABrokerOnASoftNFSMountRefusesToServeAndSaysWhy(t *testing.T) {
	const soft = "rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.20.0.27,local_lock=none,addr=10.20.0.43"
	b, health := runMountBroker(t, func(dir string) string { return mountInfoWithDataDirOn(dir, soft) })
	testkit.Eventually(t, "the view read", func() bool { return b.View.Snapshot().Synced })
	if code, body := readyz(t, health); code != http.StatusServiceUnavailable || !strings.Contains(body, `"mountRefused":["soft: a soft mount`) {
		t.Fatalf("/readyz on a soft mount = %d %s, want 503 naming the soft option", code, body)
	}
	if b.Healthy() {
		t.Error("a broker on a soft mount reports itself healthy: its partitions would stay here")
	}
	if b.partitions.Load() != nil || b.groups != nil {
		t.Error("a broker on a soft mount started its partition logs or group coordinator")
	}

	const hard = "rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.20.0.27,local_lock=none,addr=10.20.0.43"
	b, health = runMountBroker(t, func(dir string) string { return mountInfoWithDataDirOn(dir, hard) })
	testkit.Eventually(t, "partition t/0 led on a hard NFS 4.1 mount", func() bool { return b.CaughtUp() && b.Leading() == 1 })
	if code, body := readyz(t, health); code != http.StatusOK || strings.Contains(body, "mountRefused") {
		t.Fatalf("/readyz on a hard NFS 4.1 mount = %d %s, want 200", code, body)
	}
}
