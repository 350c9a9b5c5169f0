package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// MonitoringCRDsDir is the directory of the Prometheus Operator's CRDs that `make
// monitoring-crds` copies into bin/crds/: $MONITORING_CRDS (the Makefile exports it), else the
// newest bin/crds/prometheus-operator-* of the checkout.
func MonitoringCRDsDir() (string, error) {
	if dir := os.Getenv("MONITORING_CRDS"); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return "", fmt.Errorf("MONITORING_CRDS=%s: %w (make monitoring-crds copies them)", dir, err)
		}
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	found, _ := filepath.Glob(filepath.Join(root, "bin", "crds", "prometheus-operator-*"))
	if len(found) == 0 {
		return "", errors.New("no Prometheus Operator CRDs: run through `make test`, or `make monitoring-crds` (they land in bin/crds/)")
	}
	slices.Sort(found)
	return found[len(found)-1], nil
}

// InstallMonitoringCRDs installs the Prometheus Operator's PodMonitor, ServiceMonitor and
// PrometheusRule CRDs and waits until they serve. uninstall removes them again, so a suite
// that installs them in one spec leaves the control plane as it found it.
func (e *Env) InstallMonitoringCRDs() (uninstall func() error, err error) {
	dir, err := MonitoringCRDsDir()
	if err != nil {
		return nil, err
	}
	opts := envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true, MaxTime: controlPlaneWait}
	if _, err := envtest.InstallCRDs(e.Config, opts); err != nil {
		return nil, fmt.Errorf("install the CRDs of %s: %w", dir, err)
	}
	return func() error {
		if err := envtest.UninstallCRDs(e.Config, opts); err != nil {
			return fmt.Errorf("uninstall the CRDs of %s: %w", dir, err)
		}
		return nil
	}, nil
}
