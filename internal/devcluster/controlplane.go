package devcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceClusterIPRange holds the ClusterIPs of Services. The private network's loopback
// answers for it and the service proxy listens on each Service port (proxy.go).
const (
	serviceClusterIPRange = "10.96.0.0/16"
	serviceClusterFirstIP = "10.96.0.1"
	// apiServerAdvertiseAddress is a local address of the private network (198.18.0.0/15).
	apiServerAdvertiseAddress = "198.18.0.1"
)

// controllers kube-controller-manager runs: the ones whose real work paddock depends on
// (StatefulSet, EndpointSlice, garbage collection, node lifecycle), the ones behind them
// (Deployment/ReplicaSet for the operator and users' workloads, disruption for the PDB,
// namespace deletion, pod GC, taint eviction), the PersistentVolume binder for the shared data
// claim, and the ServiceAccount machinery pods get their identity from (every namespace's
// default ServiceAccount, the legacy token controller with the signing key, and the
// kube-root-ca.crt ConfigMap a ServiceAccount volume takes its ca.crt from), and the
// ClusterRole aggregation that gives Kubernetes' view and edit roles paddock's kinds.
var controllerManagerControllers = []string{
	"endpointslice-controller", "statefulset-controller", "garbage-collector-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "replicaset-controller",
	"deployment-controller", "disruption-controller", "namespace-controller",
	"pod-garbage-collector-controller", "persistentvolume-binder-controller",
	"serviceaccount-controller", "serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
	"job-controller", // the storage check (docs/storage.md, "The storage check")
}

// auditPolicy logs every request's metadata — who made it, the verb, the object, the
// answer — except the apiserver's requests to itself, node heartbeats and health checks,
// which say nothing about paddock.
// The e2e suite reads it to prove which identity each process has.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
omitManagedFields: true
rules:
- level: None
  users: ["system:apiserver"]
- level: None
  namespaces: ["kube-node-lease"]
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi*"]
- level: Metadata
`

// k8sBinaries are the files paddock dev needs in the k8s binary directory.
var k8sBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// controlPlane is the running etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler of one environment.
type controlPlane struct {
	cfg        Config
	pki        *pki
	restConfig *rest.Config
	procs      []*process // in start order; stopped in reverse
}

// checkBinaries fails with the command that builds the control-plane binaries when one is
// missing.
func checkBinaries(dir string) error {
	for _, name := range k8sBinaries {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%s not found in %s: build the Kubernetes binaries with `make k8s-bins` (or pass --k8s-bin-dir)", name, dir)
		}
	}
	return nil
}

// writeCredentials makes the environment's credentials (or, with Keep, reads the previous
// run's) and writes the admin kubeconfigs: the control plane's, straight to the apiserver, and
// the one for people and tests, through the host address the service proxy forwards (env.go).
func (cp *controlPlane) writeCredentials(context.Context) error {
	cfg := cp.cfg
	pkiDir := filepath.Join(cfg.Dir, "pki")
	var err error
	if cfg.Keep {
		cp.pki, err = loadPKI(pkiDir)
	}
	if cp.pki == nil {
		cp.pki, err = newPKI(pkiDir)
	}
	if err != nil {
		return err
	}
	cp.restConfig = &rest.Config{
		Host:            "https://" + cfg.apiServerAddr(),
		BearerToken:     cp.pki.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             100,
		Burst:           200,
	}
	if err := writeKubeconfig(cfg.controlPlaneKubeconfigPath(), cp.restConfig.Host, adminUser, cp.restConfig); err != nil {
		return err
	}
	return writeKubeconfig(cfg.KubeconfigPath(), "https://"+cfg.hostAPIServerAddr(), adminUser, cp.restConfig)
}

func (cp *controlPlane) etcdURL() string { return "http://127.0.0.1:" + strconv.Itoa(cp.cfg.EtcdPort) }

// startEtcd starts etcd and waits until it is healthy.
func (cp *controlPlane) startEtcd(ctx context.Context) error {
	cfg := cp.cfg
	peer := "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPort+1)
	if err := cp.start("etcd", []string{
		"--name=paddock-dev",
		"--data-dir=" + filepath.Join(cfg.Dir, "etcd"),
		"--listen-client-urls=" + cp.etcdURL(),
		"--advertise-client-urls=" + cp.etcdURL(),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=paddock-dev=" + peer,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}); err != nil {
		return err
	}
	if err := waitHTTP(ctx, http.DefaultClient, cp.etcdURL()+"/health", 30*time.Second); err != nil {
		return fmt.Errorf("etcd did not become healthy (see %s): %w", cfg.logPath("etcd"), err)
	}
	return nil
}

// startAPIServer writes the audit policy, starts kube-apiserver and waits until it is ready.
func (cp *controlPlane) startAPIServer(ctx context.Context) error {
	auditPolicyPath := filepath.Join(cp.cfg.Dir, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicyPath, []byte(auditPolicy), 0o644); err != nil {
		return fmt.Errorf("write audit policy: %w", err)
	}
	if err := cp.start("kube-apiserver", cp.apiServerArgs(auditPolicyPath)); err != nil {
		return err
	}
	if err := cp.waitAPIServer(ctx); err != nil {
		return fmt.Errorf("kube-apiserver did not become ready (see %s): %w", cp.cfg.logPath("kube-apiserver"), err)
	}
	return nil
}

func (cp *controlPlane) apiServerArgs(auditPolicyPath string) []string {
	cfg := cp.cfg
	return []string{
		"--etcd-servers=" + cp.etcdURL(),
		// The private network has no default route to derive an address from; everything,
		// pods included, reaches the apiserver at its advertised address.
		"--bind-address=" + apiServerAdvertiseAddress,
		"--advertise-address=" + apiServerAdvertiseAddress,
		"--secure-port=" + strconv.Itoa(cfg.APIServerPort),
		"--tls-cert-file=" + cp.pki.path(servingCertFile),
		"--tls-private-key-file=" + cp.pki.path(servingKeyFile),
		"--token-auth-file=" + cp.pki.path(tokenFile),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://" + cfg.apiServerAddr(),
		"--service-account-key-file=" + cp.pki.path(saKeyFile),
		"--service-account-signing-key-file=" + cp.pki.path(saKeyFile),
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		// Pod tokens expire when they say (not a year later), so the node agent's refresh is
		// exercised as it is on a cluster that turned the extension off.
		"--service-account-extend-token-expiration=false",
		// On top of the default plugins (ServiceAccount among them): the one OpenShift runs
		// that makes setting blockOwnerDeletion need update on the owner's finalizers.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		"--audit-policy-file=" + auditPolicyPath,
		"--audit-log-path=" + cfg.logPath("audit"),
		"--audit-log-maxsize=200",
		"--audit-log-maxbackup=1",
		// The `kubernetes` Service's endpoints would be the loopback address, which
		// EndpointSlices reject.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(cfg.Dir, "pki", "apiserver"),
	}
}

// startControllers starts kube-controller-manager and kube-scheduler, both with the control
// plane's admin kubeconfig.
func (cp *controlPlane) startControllers(context.Context) error {
	kubeconfig := cp.cfg.controlPlaneKubeconfigPath()
	kcmArgs := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllerManagerControllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + cp.pki.path(saKeyFile),
		"--root-ca-file=" + cp.pki.path(caCertFile),
		"--node-monitor-period=1s",
		"--concurrent-statefulset-syncs=5",
		"--endpointslice-updates-batch-period=0s",
	}
	if cp.cfg.NodeMonitorGracePeriod > 0 {
		kcmArgs = append(kcmArgs, "--node-monitor-grace-period="+cp.cfg.NodeMonitorGracePeriod.String())
	}
	if err := cp.start("kube-controller-manager", kcmArgs); err != nil {
		return err
	}
	return cp.start("kube-scheduler", []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	})
}

// start runs one component from the k8s binary directory, logging to logs/<name>.log.
func (cp *controlPlane) start(name string, args []string) error {
	p, err := startProcess(name, filepath.Join(cp.cfg.K8sBinDir, name), args, nil, cp.cfg.logPath(name), nil)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}

// exitedComponent returns the name of a component that has exited, or "".
func (cp *controlPlane) exitedComponent() string {
	for _, p := range cp.procs {
		if p.exited() {
			return p.name
		}
	}
	return ""
}

// stop stops the components in reverse start order.
func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop(10 * time.Second)
	}
	cp.procs = nil
}

func (cp *controlPlane) waitAPIServer(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &bearerTransport{token: cp.pki.token, base: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
	}
	return waitHTTP(ctx, client, cp.restConfig.Host+"/readyz", 60*time.Second)
}

type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(req)
}

// waitHTTP polls url until it answers 200 or timeout passes.
func waitHTTP(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close() // only the status matters
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = fmt.Errorf("GET %s: %s", url, resp.Status)
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return lastErr
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeKubeconfig writes a kubeconfig with rc's bearer token, named user, for the apiserver
// at server; its context is paddock-dev. The serving certificate is checked for the name
// "kubernetes", which it carries, so any forwarded address works.
func writeKubeconfig(path, server, user string, rc *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["paddock-dev"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: rc.CAData, TLSServerName: "kubernetes"}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	kc.Contexts["paddock-dev"] = &clientcmdapi.Context{Cluster: "paddock-dev", AuthInfo: user, Namespace: "default"}
	kc.CurrentContext = "paddock-dev"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
