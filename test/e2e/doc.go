// Package e2e is the end-to-end suite: it starts a whole `paddock dev` environment in-process
// (real etcd, kube-apiserver, kube-controller-manager, kube-scheduler, CoreDNS, the operator,
// broker processes run by the node agent) inside a private network namespace, and checks the
// fencing scenarios the way a user would: Kubernetes reads, kubectl, franz-go (Metadata,
// DescribeCluster v2, FindCoordinator, Produce, Fetch) and kcat. Clients inside reach the
// brokers by the names the cluster DNS answers (the internal listener advertises PodDNS).
//
// TestFencingScenarios runs the numbered scenarios on one environment, in an order where each
// starts from three healthy brokers: 1 bring-up (kcat -L, -P and -C inside the dev shell by
// pod DNS names), 18 storage verified (the storage check Job's two pods on two nodes certify
// the claim: StorageVerified True), 8 identities, 16 trust boundary (broker 1's token refused broker 2's Lease
// and another cluster's topics; a hostile broker's forged Lease changes no outcome; the
// NetworkPolicy; view/edit for namespace users), 9 from outside, 10 topics, 17 failed partition
// (EIO injected into one partition's files on its leader through the run-time fault plan: it
// serves on another broker within the session timeout + 2 s, nothing else moves, nothing
// acknowledged is lost), 20 monitoring (the dev Prometheus, on a 10x clock, scrapes every broker
// and the operator as the kit's PodMonitors say; every dashboard query answers; the volume,
// broker-dead and consumer-lag alerts fire in their failures and resolve after; the dashboard
// is drawn while the broker is dead, every panel with data: $DASHBOARD_SNAPSHOT, README "Monitoring"), 13 drain timing (SIGTERM → exit of a broker leading 0, 100 and 1,000 partitions; it exits 0
// having drained), 2 crash, 3 graceful, 7 operator down, 11 no acknowledged record lost (an
// idempotent producer through kill -9, pod delete, `kubectl rollout restart` and an operator
// restart; every acknowledged record read back exactly once, in order), 12 group coordinator
// moves (a group of three consumers through a kill -9 and a drain of its coordinator; offsets
// never go back, every acknowledged record consumed), 19 exactly once under faults (a kgo
// GroupTransactSession copies a produced topic through a kill -9 of its transaction
// coordinator, a drain of an output leader and a rollout restart; read committed, each output
// partition is its input partition exactly; no transaction left open), 5 rolling restart, 6 node loss,
// 15 node frozen and back, 14 node never returns and 4 scale-down (which ends with two
// brokers, so it comes last).
//
// TestReadmeQuickstart runs the README's quickstart block as written, line by line, with an
// environment of its own started by `make dev` in a scratch checkout, and checks what each line
// shows (and that a second `make dev` while it runs changes nothing).
//
// TestUpgradeUnderLoad and TestHelmInstallUpgradeUninstall (install_test.go) start
// environments of their own without the built-in operator and install it as a user does: the
// operator of an earlier commit from its install.yaml, upgraded to this build's install.yaml
// under an idempotent producer and a consumer group (no broker replaced by the upgrade; then a
// broker image roll with no acknowledged record lost); and the Helm chart — install, the same
// upgrade under load with `helm upgrade`, the bring-up scenario, uninstall in the documented
// order.
//
// It prints every measured delay, and the numbers it counted, in summary tables. It must
// never skip: a missing kcat, kubectl or missing Kubernetes binaries fail the suite.
package e2e
