// Command manifestcheck holds two checks `make verify` runs on the install manifests:
//
//	manifestcheck chart KUSTOMIZE.yaml HELM.yaml
//	    the Helm chart, rendered with its default values, installs the same operator as
//	    install.yaml: the same objects (by kind and name; install.yaml's Namespace aside), the
//	    same CRDs, the same RBAC rules (and aggregation labels), bindings, admission policy
//	    and manager pod spec (`make verify-chart` runs it twice: for every namespace, and
//	    for some, against `make build-installer NAMESPACES=…`'s rendering);
//	manifestcheck crds BASELINE_DIR CRD_DIR
//	    the CRDs are backward compatible with the baseline (the previous release's): no
//	    version, field or enum value removed, no field retyped, no new required field.
//
// Each problem is printed on its own line; the exit code is 1 when there is one.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: manifestcheck chart KUSTOMIZE.yaml HELM.yaml | manifestcheck crds BASELINE_DIR CRD_DIR"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 3 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var problems []string
	var err error
	switch args[0] {
	case "chart":
		problems, err = checkChartFiles(args[1], args[2])
	case "crds":
		problems, err = checkCRDDirs(args[1], args[2])
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "manifestcheck:", err)
		return 1
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "manifestcheck %s: %d problem(s)\n", args[0], len(problems))
		return 1
	}
	fmt.Fprintf(stdout, "manifestcheck %s: ok\n", args[0])
	return 0
}
