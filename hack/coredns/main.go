// Command coredns is the cluster DNS of `paddock dev`: CoreDNS with only the plugins its
// Corefile uses (internal/devcluster/dns.go writes it). The kubernetes plugin answers the
// records of the Kubernetes DNS specification from informers; nothing is forwarded, so a
// name outside the cluster's zones is refused rather than looked up elsewhere.
//
// This is a module of its own so that CoreDNS's dependencies never enter paddock's go.mod;
// hack/k8s-bins.sh builds it into bin/coredns-v<version>.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The plugins a Corefile may name, in CoreDNS's own execution order (its
	// core/dnsserver/zdirectives.go), which a server block's chain follows whatever order
	// the Corefile lists them in.
	dnsserver.Directives = []string{"bind", "ready", "errors", "log", "kubernetes"}
}

func main() { coremain.Run() }
