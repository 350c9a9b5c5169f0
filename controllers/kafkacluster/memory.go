package kafkacluster

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

// memoryBudgetKeys are the broker's memory budgets (docs/bounds.md, "The budgets and the
// memory limit"): the bytes of requests being read and handled, and of Fetch records held
// until written. Both are live Go heap in a broker (records from a segment file are sent with
// sendfile and take none), so they must fit under GOMEMLIMIT with room for the rest.
var memoryBudgetKeys = []string{"queued.max.request.bytes", "queued.max.response.bytes"}

// memoryBudgetShare is the part of the broker container's memory limit each budget gets by
// default (min with the table's default), and memoryBudgetsShare the part both may take
// together when spec.config sets them: the other half is the broker's base (about 50 MiB),
// its connections, the producer and group state, and the collector's headroom below
// GOMEMLIMIT. With the default 1Gi limit the share is the table's 256 MiB each.
const (
	memoryBudgetShare  = 4 // each budget: limit / 4
	memoryBudgetsShare = 2 // both together: at most limit / 2
)

// memoryBudgets is how the broker container's memory limit bounds the memory budgets.
type memoryBudgets struct {
	// flags are --<flag>=<bytes> for the budgets spec.config leaves unset whose share of the
	// limit is below the table's default.
	flags []string
	// refused are the budget keys spec.config sets that are not applied (problems says why);
	// the share of the limit applies instead.
	refused  map[string]bool
	problems []kafkaconfig.Problem
}

// planMemoryBudgets ties the budgets to the memory limit of res (the broker container's
// resources): without a limit the table's defaults and spec.config apply as they are. With
// one, an unset budget is min(default, limit/memoryBudgetShare); budgets spec.config sets
// apply when they are bounded (not -1) and together at most limit/memoryBudgetsShare —
// otherwise they are refused (a Degraded InvalidConfig names them) and the shares apply, so
// a storm can never hold more than the pod may use and the kernel's OOM killer never has to
// decide. Entries that fail their own check are CheckBrokerConfig's, not this rule's.
func planMemoryBudgets(config map[string]string, res corev1.ResourceRequirements) memoryBudgets {
	var plan memoryBudgets
	limit, ok := res.Limits[corev1.ResourceMemory]
	if !ok || limit.Value() <= 0 {
		return plan
	}
	share := limit.Value() / memoryBudgetShare
	derived := func(name string) int64 {
		k, _ := kafkaconfig.BrokerKey(name)
		def, _ := strconv.ParseInt(k.Default, 10, 64) // the table's defaults are numbers (TestDefaultBoundsAreTheTables)
		return min(def, share)
	}
	set := map[string]int64{}
	var sum int64
	unbounded := false
	for _, name := range memoryBudgetKeys {
		v, isSet := config[name]
		if isSet && kafkaconfig.CheckBroker(name, v) == nil {
			n, _ := strconv.ParseInt(v, 10, 64) // passed its check
			set[name] = n
			if n < 0 {
				unbounded = true
			}
			sum += max(n, 0)
			continue
		}
		sum += derived(name)
	}
	if len(set) > 0 && (unbounded || sum > limit.Value()/memoryBudgetsShare) {
		plan.refused = map[string]bool{}
		for _, name := range memoryBudgetKeys {
			if _, ok := set[name]; ok {
				plan.refused[name] = true
				plan.problems = append(plan.problems, kafkaconfig.Problem{Key: name, Err: budgetRefusal(name, set[name], unbounded, sum, limit)})
			}
		}
	}
	for _, name := range memoryBudgetKeys {
		if _, ok := set[name]; ok && !plan.refused[name] {
			continue // applied as spec.config sets it (kafkaconfig.StaticFlags)
		}
		k, _ := kafkaconfig.BrokerKey(name)
		if n := derived(name); strconv.FormatInt(n, 10) != k.Default {
			plan.flags = append(plan.flags, fmt.Sprintf("--%s=%d", k.Flag, n))
		}
	}
	return plan
}

// budgetRefusal says why spec.config's value n for budget name is not applied.
func budgetRefusal(name string, n int64, unbounded bool, sum int64, limit resource.Quantity) error {
	if unbounded {
		return fmt.Errorf("%s=%d: the broker container has a memory limit (%s), so its memory budgets must be bounded; each is limit/%d instead (set spec.resources without a memory limit for unbounded budgets)",
			name, n, limit.String(), memoryBudgetShare)
	}
	return fmt.Errorf("%s=%d: queued.max.request.bytes and queued.max.response.bytes together (%d) exceed half the broker container's memory limit (%s); each is limit/%d instead (raise spec.resources.limits.memory or lower them)",
		name, n, sum, limit.String(), memoryBudgetShare)
}

// withoutKeys is config without the keys in drop (nil drop: config itself).
func withoutKeys(config map[string]string, drop map[string]bool) map[string]string {
	if len(drop) == 0 {
		return config
	}
	out := make(map[string]string, len(config))
	for k, v := range config {
		if !drop[k] {
			out[k] = v
		}
	}
	return out
}

// configProblems are the entries of the cluster's spec.config the brokers do not apply:
// those failing their own check, and memory budgets the memory limit refuses.
func configProblems(c *kafkav1alpha1.KafkaCluster) []kafkaconfig.Problem {
	problems := kafkaconfig.CheckBrokerConfig(c.Spec.Config)
	return append(problems, planMemoryBudgets(c.Spec.Config, brokerResources(c)).problems...)
}
