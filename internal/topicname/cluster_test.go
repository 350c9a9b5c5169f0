package topicname

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Two KafkaClusters of one namespace whose clients create the same Kafka topic names must
// never collide on the KafkaTopic object name (docs/topics.md, "Names").
func TestTwoClustersOfANamespaceNeverShareATopicObjectName(t *testing.T) {
	clusters := []string{"a", "a-b", "b", "prod", "prod-broker", strings.Repeat("c", 45)}
	topics := []string{"orders", "b.orders", "b-orders", "Orders", "orders_v1", "_private", "a..b", "___", "...",
		strings.Repeat("z", 249), strings.Repeat("Z", 249), "x." + strings.Repeat("y", 247)}
	owner := map[string]string{}
	for _, c := range clusters {
		for _, n := range topics {
			got := ObjectNameIn(c, n)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("ObjectNameIn(%q, %.20q) = %.40q, not a valid object name: %v", c, n, got, errs)
			}
			if !strings.HasPrefix(got, c+".") {
				t.Errorf("ObjectNameIn(%q, %.20q) = %.40q, does not start with the cluster", c, n, got)
			}
			if got != ObjectNameIn(c, n) {
				t.Errorf("ObjectNameIn(%q, %.20q) is not deterministic", c, n)
			}
			if prev, dup := owner[got]; dup {
				t.Errorf("ObjectNameIn(%q, %.20q) = %.40q, also %s's", c, n, got, prev)
			}
			owner[got] = c + "/" + n
		}
	}
	// The 0.1 mapping shares names across clusters: what the cluster prefix fixes.
	if ObjectName("orders") != "orders" {
		t.Fatal("ObjectName changed: objects the 0.1 brokers created are named by it")
	}
}

func TestAClusterQualifiedObjectNameReadsAsClusterDotTopic(t *testing.T) {
	for _, tc := range []struct{ cluster, topic, want string }{
		{"prod", "orders", "prod.orders"},
		{"prod", "orders.v1", "prod.orders.v1"},
	} {
		if got := ObjectNameIn(tc.cluster, tc.topic); got != tc.want {
			t.Errorf("ObjectNameIn(%q, %q) = %q, want %q", tc.cluster, tc.topic, got, tc.want)
		}
	}
	if got := ObjectNameIn("prod", "Orders_V2"); !strings.HasPrefix(got, "prod.orders-v2-") || len(got) != len("prod.orders-v2-")+hashLen {
		t.Errorf("ObjectNameIn(prod, Orders_V2) = %q, want prod.orders-v2-<10 hex digits>", got)
	}
}
