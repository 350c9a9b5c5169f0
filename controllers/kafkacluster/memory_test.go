package kafkacluster

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

// budgetArgs are the broker arguments of goldenCluster with config and resources that set the
// memory budgets.
func budgetArgs(config map[string]string, res corev1.ResourceRequirements) []string {
	c := goldenCluster()
	c.Spec.Config, c.Spec.Resources = config, res
	var out []string
	for _, a := range desiredStatefulSet(c, goldenOptions).Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--queued-max-request-bytes=") || strings.HasPrefix(a, "--queued-max-response-bytes=") {
			out = append(out, a)
		}
	}
	return out
}

func memoryLimit(q string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
}

func TestTheMemoryBudgetsFollowTheMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		config  map[string]string
		res     corev1.ResourceRequirements
		want    []string // the budget flags, in order
		refused []string // the keys refused, with a Degraded InvalidConfig
	}{
		{rule: "the default 1Gi limit: each share is the table's 256 MiB, no flag (no roll on upgrade)",
			res: corev1.ResourceRequirements{}},
		{rule: "no memory limit: the table's defaults", res: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}}},
		{rule: "no memory limit: spec.config's unbounded budget applies", res: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
			config: map[string]string{"queued.max.request.bytes": "-1"}, want: []string{"--queued-max-request-bytes=-1"}},
		{rule: "a 512Mi limit: each budget is a quarter of it", res: memoryLimit("512Mi"),
			want: []string{"--queued-max-request-bytes=134217728", "--queued-max-response-bytes=134217728"}},
		{rule: "a 4Gi limit: a quarter is above the table's default, which stays", res: memoryLimit("4Gi")},
		{rule: "budgets set within half the limit apply as set", res: memoryLimit("2Gi"),
			config: map[string]string{"queued.max.request.bytes": "536870912", "queued.max.response.bytes": "268435456"},
			want:   []string{"--queued-max-request-bytes=536870912", "--queued-max-response-bytes=268435456"}},
		{rule: "one budget set past half the limit with the other's share: refused, the share applies", res: memoryLimit("512Mi"),
			config:  map[string]string{"queued.max.response.bytes": "268435456"},
			want:    []string{"--queued-max-request-bytes=134217728", "--queued-max-response-bytes=134217728"},
			refused: []string{"queued.max.response.bytes"}},
		{rule: "an unbounded budget under a memory limit: refused, the share applies", res: memoryLimit("1Gi"),
			config: map[string]string{"queued.max.request.bytes": "-1"}, refused: []string{"queued.max.request.bytes"}},
		{rule: "an invalid budget is CheckBrokerConfig's problem and the share applies", res: memoryLimit("512Mi"),
			config: map[string]string{"queued.max.request.bytes": "lots"},
			want:   []string{"--queued-max-request-bytes=134217728", "--queued-max-response-bytes=134217728"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := budgetArgs(tc.config, tc.res); !slices.Equal(got, tc.want) {
				t.Errorf("budget flags %q, want %q", got, tc.want)
			}
			c := goldenCluster()
			c.Spec.Config, c.Spec.Resources = tc.config, tc.res
			plan := planMemoryBudgets(c.Spec.Config, brokerResources(c))
			var refused []string
			for _, p := range plan.problems {
				refused = append(refused, p.Key)
				if !strings.Contains(p.String(), p.Key) || !strings.Contains(p.String(), "memory limit") {
					t.Errorf("the refusal %q names neither the key nor the memory limit", p)
				}
			}
			if !slices.Equal(refused, tc.refused) {
				t.Errorf("refused %q, want %q", refused, tc.refused)
			}
			for _, p := range plan.problems {
				if !slices.ContainsFunc(configProblems(c), func(q kafkaconfig.Problem) bool { return q.String() == p.String() }) {
					t.Errorf("the refusal of %s is not among the cluster's config problems (the Degraded condition)", p.Key)
				}
			}
		})
	}
}
