// CoreDNS for the e2e node: only the plugins the cluster's DNS needs, and no `forward`, so a
// name outside cluster.local is never sent anywhere (nothing may leave the machine).
// e2e/build-node.sh copies this file into a wrapper module and builds it.
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

var wanted = []string{"bind", "errors", "health", "ready", "kubernetes", "cache", "loop"}

func init() {
	// Keep CoreDNS's own execution order; drop every directive this binary does not hold.
	dnsserver.Directives = slices.DeleteFunc(dnsserver.Directives, func(name string) bool {
		return !slices.Contains(wanted, name)
	})
}

func main() {
	coremain.Run()
}
