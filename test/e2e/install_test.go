package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// The install scenarios start environments without the built-in operator
// (devcluster.Config.NoOperator) and install it as a user does: `helm install` of
// config/helm/paddock, or `kubectl apply --server-side` of an install.yaml. Two operator
// images run there: previousImage, the operator of previousCommit built from its source in the
// test, and currentImage, this build.

// previousCommit is the operator upgraded from: paddock has no release tag yet, so it is main
// as it was when the install and upgrade work began (before the pod-template digest existed),
// standing for release 0.1.0 — hack/crd-baseline holds its CRDs. Its source is taken with
// `git archive` (the repository is not touched) and built like this one.
const previousCommit = "0f7cbc3"

const (
	previousImage = "paddock.test/paddock:previous"
	currentImage  = "paddock.test/paddock:current"
	// releasedImage is the image the repository's config/default names; an install.yaml is
	// made for an image by replacing it, as `make release` does with kustomize.
	releasedImage = "ghcr.io/paddock-dev/paddock:latest"
)

var (
	previousOnce   sync.Once
	previousBinary string // guarded by previousOnce
	previousRoot   string
	previousErr    error
)

// buildPrevious builds the operator of previousCommit, once per run.
func buildPrevious(t *testing.T) (binary, root string) {
	t.Helper()
	previousOnce.Do(func() {
		dir, err := os.MkdirTemp("", "paddock-previous-")
		if err != nil {
			previousErr = err
			return
		}
		previousRoot = filepath.Join(dir, "src")
		if err := os.MkdirAll(previousRoot, 0o755); err != nil {
			previousErr = err
			return
		}
		archive := exec.Command("sh", "-c", fmt.Sprintf("git -C ../.. archive --format=tar %s | tar -x -C %s", previousCommit, previousRoot))
		if out, err := archive.CombinedOutput(); err != nil {
			previousErr = fmt.Errorf("git archive %s (the upgrade scenarios need the repository's history): %w\n%s", previousCommit, err, out)
			return
		}
		started := time.Now()
		previousBinary, previousErr = devcluster.BuildPaddock(previousRoot, dir)
		fmt.Printf("e2e: built the operator of %s in %s\n", previousCommit, time.Since(started).Round(time.Second))
	})
	if previousErr != nil {
		t.Fatal(previousErr)
	}
	return previousBinary, previousRoot
}

// startWithoutOperator starts an environment whose pods can run previousImage and
// currentImage, with no operator installed.
func startWithoutOperator(ctx context.Context, t *testing.T) *devcluster.Env {
	t.Helper()
	previous, _ := buildPrevious(t)
	cfg := devConfig(t)
	cfg.NoOperator = true
	cfg.Images = map[string]string{previousImage: previous, currentImage: paddockBinary}
	return startEnv(ctx, t, cfg, t.Name(), "environment start, no operator")
}

// installYAML writes the install.yaml of configDir (a checkout's config/) for image, and
// returns its path.
func installYAML(t *testing.T, configDir, image string) string {
	t.Helper()
	out, err := devcluster.RenderInstall(configDir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(releasedImage)) {
		t.Fatalf("%s/default names no %s to replace", configDir, releasedImage)
	}
	path := filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(path, bytes.ReplaceAll(out, []byte(releasedImage), []byte(image)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectl runs kubectl from the host's network with the environment's kubeconfig.
func kubectl(ctx context.Context, t *testing.T, env *devcluster.Env, args ...string) string {
	t.Helper()
	out, err := devcluster.HostCommand(ctx, []string{"KUBECONFIG=" + env.KubeconfigPath(), "HOME=" + t.TempDir()}, kubectlBinary(t), args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// helmBinary is $HELM (the Makefile exports it), else the checkout's bin/helm-v3.22.0.
func helmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		h = filepath.Join("..", "..", "bin", "helm-v3.22.0")
	}
	abs, err := filepath.Abs(h)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		t.Fatalf("helm is not built (%v): run `make helm`; the e2e suite does not run without it", err)
	}
	return abs
}

// helm runs helm from the host's network with the environment's kubeconfig and a home of its
// own.
func helm(ctx context.Context, t *testing.T, env *devcluster.Env, args ...string) string {
	t.Helper()
	home := t.TempDir()
	vars := []string{"KUBECONFIG=" + env.KubeconfigPath(), "HOME=" + home, "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
	out, err := devcluster.HostCommand(ctx, vars, helmBinary(t), args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("helm %s:\n%s", args[0], strings.TrimSpace(string(out)))
	return string(out)
}

// chartDir is the chart of this checkout, as an absolute path (helm runs in the host's
// network, from another directory).
func chartDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "config", "helm", "paddock"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitOperator waits until the operator Deployment has rolled out and its pod runs image.
func waitOperator(ctx context.Context, t *testing.T, env *devcluster.Env, image string) {
	t.Helper()
	started := time.Now()
	testkit.Within(t, "the operator Deployment to run "+image, 3*time.Minute, func() (bool, string) {
		var d appsv1.Deployment
		if err := env.Client().Get(ctx, env.Manager(), &d); err != nil {
			return false, err.Error()
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return false, "the Deployment runs " + got
		}
		if err := env.StartManager(); err != nil { // replicas stay 1; waits for the rollout
			return false, err.Error()
		}
		pod, err := env.ManagerPod(ctx)
		if err != nil {
			return false, err.Error()
		}
		return pod.Spec.Containers[0].Image == image, "the ready manager pod runs " + pod.Spec.Containers[0].Image
	})
	measure(t, t.Name(), "operator "+image+" Available", time.Since(started))
}

// brokerPods is what an operator upgrade must leave alone: each broker pod's UID and the
// StatefulSet's revisions.
type brokerPods struct {
	uids             map[int32]string
	current, updated string
}

func (s *suite) brokerPods(ctx context.Context, t *testing.T) brokerPods {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.StatefulSetName(s.name)}, sts); err != nil {
		t.Fatal(err)
	}
	return brokerPods{uids: s.podUIDs(ctx, t), current: sts.Status.CurrentRevision, updated: sts.Status.UpdateRevision}
}

// assertUpgradeRolledNoBroker waits until the new operator has reconciled the cluster — the
// StatefulSet carries the pod-template digest only this version writes, with the
// resourceVersion moved on from before — then watches for a while that no broker pod was
// replaced and the StatefulSet's revision did not move.
func (s *suite) assertUpgradeRolledNoBroker(ctx context.Context, t *testing.T, before brokerPods, sinceVersion string) {
	t.Helper()
	testkit.Within(t, "the upgraded operator to reconcile the StatefulSet", 2*time.Minute, func() (bool, string) {
		sts := &appsv1.StatefulSet{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.StatefulSetName(s.name)}, sts); err != nil {
			return false, err.Error()
		}
		_, annotated := sts.Annotations[kafkav1alpha1.AnnotationPodTemplateInputs]
		return annotated && sts.ResourceVersion != sinceVersion, fmt.Sprintf("annotated %v, resourceVersion %s", annotated, sts.ResourceVersion)
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		now := s.brokerPods(ctx, t)
		for id, uid := range before.uids {
			if now.uids[id] != uid {
				t.Fatalf("the operator upgrade replaced the pod of broker %d (uid %s → %s)", id, uid, now.uids[id])
			}
		}
		if now.updated != before.updated || now.current != before.current {
			t.Fatalf("the operator upgrade moved the StatefulSet's revision (current %s → %s, update %s → %s)",
				before.current, now.current, before.updated, now.updated)
		}
		time.Sleep(time.Second)
	}
	t.Logf("the operator upgrade replaced no broker pod and left the StatefulSet at revision %s", before.current)
}

// statefulSetVersion is the StatefulSet's resourceVersion now.
func (s *suite) statefulSetVersion(ctx context.Context, t *testing.T) string {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.StatefulSetName(s.name)}, sts); err != nil {
		t.Fatal(err)
	}
	return sts.ResourceVersion
}

// setBrokerImage changes spec.image and returns once every broker pod was replaced by one
// running image and the cluster is healthy again.
func (s *suite) setBrokerImage(ctx context.Context, t *testing.T, image string) {
	t.Helper()
	before := s.podUIDs(ctx, t)
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(kc.DeepCopy())
	kc.Spec.Image = image
	if err := s.c.Patch(ctx, kc, patch); err != nil {
		t.Fatal(err)
	}
	testkit.Within(t, "every broker rolled to "+image+" and healthy", 6*time.Minute, func() (bool, string) {
		for id := range int32(3) {
			pod, err := s.pod(ctx, id)
			if err != nil || string(pod.UID) == before[id] || pod.Spec.Containers[0].Image != image {
				return false, fmt.Sprintf("broker %d not replaced yet", id)
			}
		}
		return s.healthy(ctx, 3)
	})
}

// createCluster creates the suite's three-broker cluster running image and waits until it is
// healthy.
func (s *suite) createCluster(ctx context.Context, t *testing.T, image string) time.Time {
	t.Helper()
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}}); err != nil {
		t.Fatal(err)
	}
	kc := devcluster.SampleCluster(s.namespace, s.name, 3, s.env.HostAddress())
	kc.Spec.Image = image
	kc.Spec.DrainTimeout = &metav1.Duration{Duration: 20 * time.Second}
	applied := time.Now()
	if err := s.c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	testkit.Within(t, "three healthy brokers", 4*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })
	measure(t, t.Name(), "apply → 3 brokers Serving/Alive", time.Since(applied))
	return applied
}

// groupConsumer reads a topic in a consumer group and remembers every value it got.
type groupConsumer struct {
	cl   *kgo.Client
	done chan struct{}

	mu   sync.Mutex
	seen map[string]bool // guarded by mu
	// last is the offset of the last record consumed per partition, and gaps every jump
	// past the next offset: the topic holds no control batches and is never compacted, so
	// its offsets are contiguous and a jump is a record the group skipped.
	last map[int32]int64 // guarded by mu
	gaps []string        // guarded by mu
}

func startGroupConsumer(ctx context.Context, t *testing.T, s *suite, topic string) *groupConsumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.seeds()...), kgo.ConsumerGroup("e2e-upgrade"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond)}, clientLog("group-consumer")...)...)
	if err != nil {
		t.Fatal(err)
	}
	g := &groupConsumer{cl: cl, done: make(chan struct{}), seen: map[string]bool{}, last: map[int32]int64{}}
	go func() {
		defer close(g.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			g.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				g.seen[string(r.Value)] = true
				if last, ok := g.last[r.Partition]; ok && r.Offset > last+1 {
					g.gaps = append(g.gaps, fmt.Sprintf("%s: partition %d jumped from offset %d to %d (leader epoch %d)",
						time.Now().Format("15:04:05.000"), r.Partition, last, r.Offset, r.LeaderEpoch))
				}
				g.last[r.Partition] = r.Offset
			})
			g.mu.Unlock()
		}
	}()
	t.Cleanup(g.close)
	return g
}

func (g *groupConsumer) close() {
	g.cl.Close()
	<-g.done
}

// missing counts the acknowledged records the group has not consumed, and describes the
// first few (partition, acknowledged offset, when) and the jumps in the group's offsets.
func (g *groupConsumer) missing(acks []ack) (int, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	var first []string
	for _, a := range acks {
		if !g.seen[fmt.Sprintf("%d-%d", a.partition, a.k)] {
			n++
			if len(first) < 5 {
				first = append(first, fmt.Sprintf("%d-%d at offset %d, acknowledged %s (last consumed there: %d)",
					a.partition, a.k, a.offset, a.at.Format("15:04:05.000"), g.last[a.partition]))
			}
		}
	}
	if n == 0 {
		return 0, ""
	}
	return n, fmt.Sprintf("%d acknowledged records not consumed by the group yet, first %v; jumps in the group's offsets: %v", n, first, g.gaps)
}

// jumps returns the jumps in the group's offsets so far.
func (g *groupConsumer) jumps() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.gaps)
}

// TestUpgradeUnderLoad installs the operator of previousCommit from its install.yaml, creates
// a cluster whose brokers run previousImage (spec.image pinned), and upgrades the operator to
// this build with this build's install.yaml (`kubectl apply --server-side`), then the brokers
// to this build's image, under load (upgradeUnderLoad).
func TestUpgradeUnderLoad(t *testing.T) {
	const scenario = "upgrade under load"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env := startWithoutOperator(ctx, t)
	_, previousSource := buildPrevious(t)
	kubectl(ctx, t, env, "apply", "--server-side", "-f", installYAML(t, filepath.Join(previousSource, "config"), previousImage))
	waitOperator(ctx, t, env, previousImage)

	// The operator of previousCommit bootstraps the internal listener of a cluster with NodePort
	// listeners through <c>-bootstrap, this one through <c>-bootstrap-internal (docs/operations.md,
	// "Upgrade"): the clients seed from the brokers' pod DNS names, which both give them.
	s := &suite{env: env, c: env.Client(), namespace: "e2e-upgrade", name: "up", port: 9092, podSeeds: true}
	s.createCluster(ctx, t, previousImage)
	s.upgradeUnderLoad(ctx, t, scenario, "install.yaml", func() {
		kubectl(ctx, t, env, "apply", "--server-side", "--force-conflicts", "-f", installYAML(t, filepath.Join("..", "..", "config"), currentImage))
	})
}

// upgradeUnderLoad starts an idempotent acks=all producer and a group consumer on s's cluster
// (three brokers running previousImage), upgrades the operator to currentImage with upgrade
// (how says with what), checks that no broker pod was replaced by it, then moves spec.image
// to currentImage, which rolls the brokers one at a time, each draining. No acknowledged
// record may be lost, duplicated or misplaced, and the group must consume every one; the
// longest time without an acknowledgement in each window is printed. It returns when
// spec.image was changed.
func (s *suite) upgradeUnderLoad(ctx context.Context, t *testing.T, scenario, how string, upgrade func()) (rolled time.Time) {
	t.Helper()
	p := startAckedProducer(ctx, t, s, scenario)
	consumer := startGroupConsumer(ctx, t, s, nolossTopic)

	upgradeStart := time.Now()
	before, version := s.brokerPods(ctx, t), s.statefulSetVersion(ctx, t)
	upgrade()
	waitOperator(ctx, t, s.env, currentImage)
	s.assertUpgradeRolledNoBroker(ctx, t, before, version)
	upgradeEnd := time.Now()
	measure(t, scenario, "operator upgrade ("+how+") → reconciled, no broker replaced", upgradeEnd.Sub(upgradeStart))

	rollStart := time.Now()
	s.setBrokerImage(ctx, t, currentImage)
	testkit.Within(t, "every partition led and acknowledging after the roll", 2*time.Minute, func() (bool, string) {
		if ok, detail := s.topicLed(ctx, nolossTopic); !ok {
			return false, detail
		}
		return p.ackedAllSince(time.Now().Add(-5 * time.Second))
	})
	rollEnd := time.Now()
	measure(t, scenario, "spec.image changed → every broker replaced, healthy, every partition acknowledging", rollEnd.Sub(rollStart))

	produced := p.stop(ctx)
	acks, failures := p.results()
	for _, w := range []struct {
		name       string
		start, end time.Time
	}{{"operator upgrade", upgradeStart, upgradeEnd}, {"broker image roll", rollStart, rollEnd}} {
		anyGap, worstGap, worst := gaps(acks, w.start, w.end)
		measure(t, scenario, w.name+": longest time without an acknowledgement, any partition", anyGap.took)
		measure(t, scenario, fmt.Sprintf("%s: longest time without an acknowledgement, worst partition (%d)", w.name, worst), worstGap.took)
	}
	records, err := readTopic(ctx, s, nolossTopic)
	if err != nil {
		t.Fatal(err)
	}
	c := check(acks, records)
	// The log is checked before the group is waited for, so a failure of either says which.
	if len(c.lost) > 0 {
		t.Errorf("%d acknowledged records lost, first %v", len(c.lost), c.lost[:min(len(c.lost), 10)])
	}
	if c.duplicated > 0 || c.outOfOrder > 0 || len(c.misplaced) > 0 {
		t.Errorf("%d duplicated, %d out of order, %d misplaced", c.duplicated, c.outOfOrder, len(c.misplaced))
	}
	var unconsumed int
	testkit.Within(t, "the group to have consumed every acknowledged record", 2*time.Minute, func() (bool, string) {
		var detail string
		unconsumed, detail = consumer.missing(acks)
		return unconsumed == 0, detail
	})
	if jumps := consumer.jumps(); len(jumps) > 0 {
		t.Errorf("the group skipped records: %v", jumps)
	}
	t.Logf("%s: produced %d, acknowledged %d, read back %d, lost %d, duplicated %d, out of order %d, misplaced %d, produce failures %d",
		scenario, produced, c.acknowledged, c.read, len(c.lost), c.duplicated, c.outOfOrder, len(c.misplaced), len(failures))
	count(scenario, "records acknowledged", c.acknowledged)
	count(scenario, "acknowledged and lost (must be 0)", len(c.lost))
	count(scenario, "duplicated (must be 0)", c.duplicated)
	count(scenario, "acknowledged, not consumed by the group (must be 0)", unconsumed)
	if c.acknowledged == 0 {
		t.Fatal("no record was acknowledged")
	}
	return rollStart
}

// TestHelmInstallUpgradeUninstall installs the operator with the Helm chart at previousImage
// (`helm install`, real helm against the dev apiserver), creates a cluster pinned to that
// image, upgrades the operator to this build with `helm upgrade` and then the brokers to this
// build's image, under load (upgradeUnderLoad: no broker pod replaced by the upgrade, no
// acknowledged record lost), runs the bring-up scenario (three brokers Serving,
// Metadata and DescribeCluster, kcat produce and consume in the dev shell), and uninstalls in
// the documented order: the KafkaTopics and the KafkaCluster first (its data claim stays),
// then `helm uninstall`, then the CRDs, which Helm leaves — nothing is left stuck on a
// finalizer.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	const scenario = "helm"
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat`; the e2e suite does not run without it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env := startWithoutOperator(ctx, t)
	repo, tag, _ := strings.Cut(previousImage, ":")
	_, currentTag, _ := strings.Cut(currentImage, ":")
	helm(ctx, t, env, "install", "paddock", chartDir(t), "--namespace", "paddock-system", "--create-namespace",
		"--set", "image.repository="+repo, "--set", "image.tag="+tag)
	waitOperator(ctx, t, env, previousImage)

	s := &suite{env: env, c: env.Client(), namespace: "e2e-helm", name: "hc", port: 9092, podSeeds: true}
	s.createCluster(ctx, t, previousImage)
	rolled := s.upgradeUnderLoad(ctx, t, scenario, "helm upgrade", func() {
		helm(ctx, t, env, "upgrade", "paddock", chartDir(t), "--namespace", "paddock-system", "--reuse-values", "--set", "image.tag="+currentTag)
	})
	bringUp(ctx, t, s, rolled)

	started := time.Now()
	// docs/operations.md, "Uninstall", step 1, as written: kubectl waits until they are gone.
	kubectl(ctx, t, env, "delete", "kafkatopics.kafka.paddock.dev,kafkaclusters.kafka.paddock.dev", "--all", "-A", "--timeout=2m")
	if _, err := s.cluster(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("the KafkaCluster is still there after kubectl delete: %v", err)
	}
	helm(ctx, t, env, "uninstall", "paddock", "--namespace", "paddock-system", "--wait")
	testkit.Within(t, "the operator's objects to be gone", 2*time.Minute, func() (bool, string) {
		return s.operatorGone(ctx)
	})
	claim := &corev1.PersistentVolumeClaim{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.DataClaimName(s.name)}, claim); err != nil {
		t.Errorf("after uninstalling, the data claim is retained (spec.storage.deleteClaim false): %v", err)
	}
	kubectl(ctx, t, env, "delete", "-f", filepath.Join(chartDir(t), "crds"), "--wait=true", "--timeout=60s")
	measure(t, scenario, "delete the topics and the cluster, helm uninstall, delete the CRDs", time.Since(started))
}

// operatorGone reports whether nothing the chart installed is left: no Deployment,
// ServiceAccount, Role or RoleBinding in paddock-system, no ClusterRole, ClusterRoleBinding,
// ValidatingAdmissionPolicy or binding labelled paddock.
func (s *suite) operatorGone(ctx context.Context) (bool, string) {
	paddock := client.MatchingLabels{kafkav1alpha1.LabelName: kafkav1alpha1.LabelNameValue}
	namespaced := map[string]client.ObjectList{
		"deployments": &appsv1.DeploymentList{}, "serviceaccounts": &corev1.ServiceAccountList{},
		"roles": &rbacv1.RoleList{}, "rolebindings": &rbacv1.RoleBindingList{},
	}
	lists := map[string]client.ObjectList{
		"clusterroles": &rbacv1.ClusterRoleList{}, "clusterrolebindings": &rbacv1.ClusterRoleBindingList{},
		"validatingadmissionpolicies":       &admissionregistrationv1.ValidatingAdmissionPolicyList{},
		"validatingadmissionpolicybindings": &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{},
	}
	maps.Copy(lists, namespaced)
	var left []string
	for what, list := range lists {
		opts := []client.ListOption{paddock}
		if namespaced[what] != nil {
			opts = append(opts, client.InNamespace("paddock-system"))
		}
		if err := s.c.List(ctx, list, opts...); err != nil {
			return false, err.Error()
		}
		if n := meta.LenList(list); n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, what))
		}
	}
	return len(left) == 0, "left: " + strings.Join(left, ", ")
}
