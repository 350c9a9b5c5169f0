# paddock — the front door. `make help` lists every target.
#
# Tools are pinned by version and installed into bin/ by `go install`; the Kubernetes
# control-plane binaries are built from the Go module proxy by hack/k8s-bins.sh into
# bin/k8s/<version>/. Nothing here needs Docker or a download site.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

## Versions (pinned)
CONTROLLER_TOOLS_VERSION ?= v0.23.0
# paddock dev renders config/default with the kustomize library in go.mod
# (sigs.k8s.io/kustomize/api v0.21.2 is kustomize v5.8.2's); `make verify` checks they agree.
KUSTOMIZE_VERSION ?= v5.8.2
GOTESTSUM_VERSION ?= v1.13.0
GOLANGCI_LINT_VERSION ?= v2.15.0
# helm, built from the Go module proxy (`go install helm.sh/helm/v3/cmd/helm`).
HELM_VERSION ?= v3.22.0
# promtool (the Prometheus module's cmd/promtool) checks the monitoring kit's alert rules and
# the processes' /metrics (test/monitoring). Built with -tags remove_all_sd: the
# service-discovery plugins (cloud SDKs), which the rule, metrics and unit-test commands do
# not use, more than double its cold build (docs/testing.md, "promtool").
PROMTOOL_VERSION ?= v0.316.0
# Prometheus itself (cmd/prometheus of the same module), for paddock dev and the e2e suite:
# remove_all_sd with the one discovery plugin it uses back in (enable_kubernetes_sd). Built
# from the module proxy's copy, which carries no compiled web UI: the HTTP API and /metrics
# answer, the web pages do not (docs/devcluster.md, "Prometheus").
PROMETHEUS_VERSION ?= $(PROMTOOL_VERSION)
# The Prometheus Operator whose CRDs (PodMonitor, ServiceMonitor, PrometheusRule) the envtest
# suites install: the operator's own PodMonitor (controllers/kafkacluster) and the monitoring
# kit's objects (test/monitoring) are created against the real schemas. Copied out of the
# module's example/ directory into bin/, never committed.
PROMETHEUS_OPERATOR_VERSION ?= v0.94.0

comma := ,

## Locations
ROOT := $(shell pwd)
LOCALBIN ?= $(ROOT)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
export HELM
CHART := config/helm/paddock
# test/monitoring reads $PROMTOOL (a plain go test falls back to bin/promtool-*).
export PROMTOOL := $(LOCALBIN)/promtool-$(PROMTOOL_VERSION)
# paddock dev and test/e2e read $PROMETHEUS (paddock dev's --prometheus-binary default).
export PROMETHEUS := $(LOCALBIN)/prometheus-$(PROMETHEUS_VERSION)
# controllers/kafkacluster and test/monitoring read $MONITORING_CRDS (a directory of CRD files).
export MONITORING_CRDS := $(LOCALBIN)/crds/prometheus-operator-$(PROMETHEUS_OPERATOR_VERSION)
K8S_VERSION := $(shell grep -oE 'k8s.io/kubernetes v[0-9.]+' hack/k8s-bins/go.mod | head -1 | cut -dv -f2)
K8S_BINS := $(LOCALBIN)/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS := $(K8S_BINS)
# The kubectl the e2e suite runs from the host's network (test/e2e reads $KUBECTL).
export KUBECTL := $(LOCALBIN)/kubectl-v$(K8S_VERSION)
# The cluster DNS of paddock dev (CoreDNS built from hack/coredns); internal/devcluster reads $COREDNS.
COREDNS_VERSION := $(shell grep -oE 'github.com/coredns/coredns v[0-9.]+' hack/coredns/go.mod | head -1 | cut -dv -f2)
export COREDNS := $(LOCALBIN)/coredns-v$(COREDNS_VERSION)

IMG ?= ghcr.io/paddock-dev/paddock:latest
# What `paddock version` reports (internal/buildinfo), stamped at link time: the release
# VERSION (OLM bundle section) and the commit, "-modified" when tracked files have changes.
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -modified)
BUILDINFO := github.com/paddock-dev/paddock/internal/buildinfo
LDFLAGS = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(GIT_COMMIT)
GO_TEST_FLAGS ?= -count=1 -timeout=40m
# The unit packages (pure rules, the dev harness and the broker) run with the race detector;
# everything else (envtest suites of api/ and controllers/, the e2e suite) without it.
RACE_PKGS := ./internal/... ./broker/...
OTHER_PKGS = $(shell go list ./... | grep -Ev '^$(shell go list -m)/(internal|broker)(/|$$)')
FUZZTIME ?= 20s
BENCHTIME ?= 2s
# How long `make soak-storage` runs the seeded storage simulations; RACE=1 adds the race detector.
DURATION ?= 10m
# Records (1 KiB each) per server and direction in `make bench`; kfake keeps them all in memory.
BENCH_RECORDS ?= 200000
BENCH_COUNT ?= 3

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases) and the manager's RBAC (config/rbac: namespaced and cluster-scoped ClusterRoles).
	$(CONTROLLER_GEN) rbac:roleName=paddock-manager crd:generateEmbeddedObjectMeta=false webhook \
		paths="./api/..." paths="./controllers" \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=paddock-manager-cluster,fileName=cluster_role.yaml paths="./controllers/clusterscope" \
		output:rbac:artifacts:config=config/rbac
	@# The Helm chart installs every CRD of config/crd/bases, grants config/rbac's rules and
	@# carries config/admission's policy (templates/ read them from files/).
	rm -f $(CHART)/crds/*.yaml $(CHART)/files/*.yaml && cp config/crd/bases/*.yaml $(CHART)/crds/
	for f in rbac/role rbac/cluster_role rbac/leader_election_role rbac/kafka_viewer_role rbac/kafka_editor_role \
		admission/broker_writes_policy admission/broker_writes_binding; do \
		sed '/^---$$/d' config/$$f.yaml > $(CHART)/files/$$(basename $$f).yaml; done

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go' | grep -v "^hack/.*/")

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml: errcheck, govet, ineffassign, staticcheck, unused, gofmt), and vet the slim build (-tags nodev) and hack/bundle.
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...
	go vet -tags nodev .
	go -C hack/bundle vet ./...
	go -C hack/coredns vet ./...
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: verify-imports
verify-imports: ## Fail if a package breaks the import rules of docs/architecture.md.
	hack/verify-imports.sh

.PHONY: verify-citations
verify-citations: ## Fail if a comment cites a document that is not in the repository, or a docs/ section that does not exist (hack/citations).
	go run ./hack/citations

.PHONY: verify
verify: $(CONTROLLER_GEN) $(KUSTOMIZE) lint verify-imports verify-citations verify-chart verify-crds ## Fail if generated files are stale, an import rule is broken, a comment cites a missing document, a linter objects, the Helm chart and install.yaml differ, a CRD change breaks stored objects, or paddock dev would install other manifests than dist/install.yaml.
	hack/verify-generated.sh
	$(KUSTOMIZE) build config/monitoring >/dev/null
	@diff -u <($(KUSTOMIZE) build config/default) <(go run . dev --print-install) || { \
		echo "verify: paddock dev renders config/default differently from kustomize $(KUSTOMIZE_VERSION): keep go.mod's sigs.k8s.io/kustomize/api in step with KUSTOMIZE_VERSION" >&2; exit 1; }

.PHONY: verify-chart
verify-chart: $(HELM) $(KUSTOMIZE) ## helm lint the chart, and fail if `helm template` installs another operator than install.yaml (objects, CRDs, RBAC, admission policy, the manager pod), with the default values and with watchNamespaces against NAMESPACES=.
	$(HELM) lint --strict $(CHART) --kube-version $(K8S_VERSION)
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(KUSTOMIZE) build config/default > $$tmp/install.yaml; \
	$(HELM) template paddock $(CHART) --namespace paddock-system --kube-version $(K8S_VERSION) --include-crds --set image.tag=latest > $$tmp/chart.yaml; \
	go run ./hack/manifestcheck chart $$tmp/install.yaml $$tmp/chart.yaml; \
	go run ./hack/namespaced-install --namespaces=team-a,team-b < $$tmp/install.yaml > $$tmp/install-namespaced.yaml; \
	$(HELM) template paddock $(CHART) --namespace paddock-system --kube-version $(K8S_VERSION) --include-crds --set image.tag=latest \
		--set 'watchNamespaces={team-a,team-b}' > $$tmp/chart-namespaced.yaml; \
	go run ./hack/manifestcheck chart $$tmp/install-namespaced.yaml $$tmp/chart-namespaced.yaml

.PHONY: verify-crds
verify-crds: ## Fail if a CRD removes or retypes a field of the last release's (hack/crd-baseline), drops an enum value or a version, or makes a field required.
	go run ./hack/manifestcheck crds hack/crd-baseline config/crd/bases

.PHONY: crd-baseline
crd-baseline: manifests ## After a release: record its CRDs as the baseline the next one must stay compatible with.
	rm -f hack/crd-baseline/*.yaml && cp config/crd/bases/*.yaml hack/crd-baseline/

##@ Test

# go test runs through gotestsum (pinned, bin/): one line per package, each failure's output,
# and at the end of each run the failed tests by name. Every run's JSON events land in
# TEST_RESULTS, which hack/testsummary reads for the closing summary: failed tests, packages
# that failed outside a test, the slowest tests and packages. No test is retried: a flake
# fails the run, and names itself.
GOTESTSUM ?= $(LOCALBIN)/gotestsum-$(GOTESTSUM_VERSION)
TEST_RESULTS ?= $(LOCALBIN)/test-results
GOTESTSUM_FORMAT ?= pkgname-and-test-fails
# e2e scenario 20 draws the dashboard while a broker is dead (internal/monitoring/snapshot)
# to DASHBOARD_SNAPSHOT; make dashboard-snapshot draws it for the README.
export DASHBOARD_SNAPSHOT ?= $(TEST_RESULTS)/dashboard-broker-dead.png
# gotest runs go test with arguments $(2) through gotestsum, its events into TEST_RESULTS/$(1).json.
gotest = echo "test: go test $(2)" && $(GOTESTSUM) --format $(GOTESTSUM_FORMAT) --format-hide-empty-pkg \
	--jsonfile $(TEST_RESULTS)/$(1).json -- $(2)
# The envtest suites (api/, controllers/) and the client suites on in-process brokers and envtest.
ENVTEST_PKGS := ./api/... ./controllers/... ./test/topics/... ./test/groups/...

.PHONY: test
test: manifests generate k8s-bins coredns kubectl kcat kafkajs $(HELM) $(PROMTOOL) $(PROMETHEUS) $(MONITORING_CRDS) $(GOTESTSUM) ## Run every test: unit (with -race), envtest, broker, client interop, fuzz (bounded) and e2e; then name every failed test and the slowest ones.
	@rm -rf $(TEST_RESULTS) && mkdir -p $(TEST_RESULTS); status=0; \
	$(call gotest,race,-race $(GO_TEST_FLAGS) $(RACE_PKGS)) || status=1; \
	$(call gotest,other,$(GO_TEST_FLAGS) $(OTHER_PKGS)) || status=1; \
	(cd hack/bundle && $(call gotest,bundle,$(GO_TEST_FLAGS) ./...)) || status=1; \
	$(MAKE) --no-print-directory bundle-validate || status=1; \
	$(MAKE) --no-print-directory fuzz || status=1; \
	go run ./hack/testsummary $(TEST_RESULTS); \
	exit $$status

.PHONY: test-unit
test-unit: k8s-bins coredns $(GOTESTSUM) ## Run the unit packages (pure rules, dev harness, broker) with the race detector.
	@mkdir -p $(TEST_RESULTS) && $(call gotest,race,-race $(GO_TEST_FLAGS) $(RACE_PKGS))

.PHONY: test-rules
test-rules: k8s-bins $(PROMTOOL) $(MONITORING_CRDS) $(GOTESTSUM) ## Run the monitoring kit's checks (test/monitoring): promtool unit tests of every alert, promtool check rules and metrics, every dashboard query answered from real brokers' and the manager's /metrics.
	@mkdir -p $(TEST_RESULTS) && $(call gotest,rules,$(GO_TEST_FLAGS) ./test/monitoring/...)

.PHONY: test-envtest
test-envtest: k8s-bins $(MONITORING_CRDS) $(GOTESTSUM) ## Run the envtest suites (api/, controllers/) and the client suites on in-process brokers (test/topics, test/groups).
	@mkdir -p $(TEST_RESULTS) && $(call gotest,envtest,$(GO_TEST_FLAGS) $(ENVTEST_PKGS))

LOAD_PASSES ?= 3
LOAD_TARGETS ?= test
.PHONY: test-under-load
test-under-load: ## Run `make LOAD_TARGETS` (test; or e.g. "test-unit test-envtest") LOAD_PASSES (3) times beside a CPU hog on every core (hack/cpuhog); name each failed test; one summary.
	LOAD_PASSES=$(LOAD_PASSES) LOAD_TARGETS="$(LOAD_TARGETS)" hack/test-under-load.sh

.PHONY: e2e
e2e: k8s-bins coredns kubectl kcat $(HELM) $(PROMETHEUS) ## Run only the end-to-end suite (test/e2e) against a fresh paddock dev environment.
	go test $(GO_TEST_FLAGS) -v ./test/e2e/...

.PHONY: dashboard-snapshot
dashboard-snapshot: k8s-bins coredns kubectl kcat $(HELM) $(PROMETHEUS) ## Draw the dashboard during a broker's death (e2e scenario 20 in a fresh paddock dev) to docs/images/dashboard-broker-dead.png, README "Monitoring"'s picture.
	DASHBOARD_SNAPSHOT=$(ROOT)/docs/images/dashboard-broker-dead.png go test $(GO_TEST_FLAGS) -v -run 'TestFencingScenarios/^(1_bring-up|20_monitoring)$$' ./test/e2e/

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 20s) on top of its committed seed corpus.
	hack/fuzz.sh $(FUZZTIME)

.PHONY: soak-storage
soak-storage: ## Run broker/storage's seeded simulations (racing takeovers, deposed writers, crashes; local disk and NFS semantics) for DURATION and print iterations, seeds and faults survived.
	go test $(if $(RACE),-race) -count=1 -timeout 0 -run '^TestSoakStorage$$' -v ./broker/storage/ -storage.soak=$(DURATION) \
		| grep -vE '^\s*(=== RUN|--- PASS|=== PAUSE|=== CONT)'

.PHONY: bench-balance
bench-balance: ## Benchmark the partition balancer (100 brokers, 10,000 partitions: steady, broker lost/joined, cold start).
	go test -run '^$$' -bench 'Rebalance' -benchmem -count=5 ./internal/balance/

.PHONY: bench-storage
bench-storage: ## Run the broker/storage benchmarks (group commit vs plain fsync loops, reads) for BENCHTIME each.
	go test -run='^$$' -bench=. -benchtime=$(BENCHTIME) ./broker/storage/

.PHONY: bench-compaction
bench-compaction: ## Benchmark the log cleaner (MB/s of dirty log vs a sequential read of the same files) and acks=all produce while cleaning vs without, in one run.
	go test -run='^$$' -bench='^(BenchmarkCleaner|BenchmarkProduceWhileCleaning)$$' -benchtime=1x -count=2 ./broker/storage/

.PHONY: bench-dataplane
bench-dataplane: ## Benchmark kgo produce (acks=all, 1 KiB records; pipelined and not), consume, and SIGTERM-to-exit drains (0, 100, 1000 partitions) on in-process brokers, for BENCHTIME each.
	go test -run='^$$' -bench='BenchmarkProduceKgo|BenchmarkConsumeKgo|BenchmarkDrain' -benchtime=$(BENCHTIME) ./broker/

.PHONY: bench-groups
bench-groups: ## Benchmark a group coordinator's load of a 1,000-partition group after an hour, a day and 30 days of 5-second commits (time, peak heap, state, file size).
	go test -run='^$$' -bench='^BenchmarkGroupLoad$$' -benchtime=5x ./broker/groups/

.PHONY: bench-txn
bench-txn: ## Benchmark transactional produce (kgo, acks=all, 1 KiB, 16 partitions; a commit every 100 ms and every 10,000 records) against idempotent produce in one run: MB/s, the ratios, commit latency p50/p99.
	go test -run='^$$' -bench='^BenchmarkTransactions$$' -benchtime=100000x ./broker/

.PHONY: bench
bench: ## In one run: the plain write+fdatasync loop (the disk bound), kgo produce (acks=all, 1 KiB, 16 partitions) and consume (sendfile and the vectored write) through one broker and through franz-go's kfake, produce and consume over a TLS + SCRAM-SHA-512 listener, what a new connection costs (plaintext, TLS, TLS + SCRAM), then the bounds (idle connections, fetch storm); prints the figures and ratios (hack/benchreport).
	{ go test -run='^$$' -bench='^BenchmarkSyncLoop$$' -benchtime=$(BENCHTIME) -count=$(BENCH_COUNT) ./broker/storage/ && \
	  go test -run='^$$' -bench='^BenchmarkCompare$$' -benchtime=$(BENCH_RECORDS)x -count=$(BENCH_COUNT) ./broker/ && \
	  go test -run='^$$' -bench='^BenchmarkConnect$$' -benchtime=50x -count=$(BENCH_COUNT) ./broker/ && \
	  go test -run='^$$' -bench='^(BenchmarkIdleConnections|BenchmarkFetchStorm)$$' -benchtime=1x ./broker/; } | tee /dev/stderr | go run ./hack/benchreport
	$(MAKE) --no-print-directory bench-groups
	$(MAKE) --no-print-directory bench-txn

.PHONY: bench-bounds
bench-bounds: ## The resource bounds alone (docs/bounds.md): RSS per idle connection at 15,000 connections, and broker RSS under a fetch storm (from the files and through memory).
	go test -run='^$$' -bench='^(BenchmarkIdleConnections|BenchmarkFetchStorm)$$' -benchtime=1x -v ./broker/

.PHONY: test-update-golden
test-update-golden: ## Regenerate golden files for the child-object builders (controllers/kafkacluster/testdata/golden).
	go test ./controllers/kafkacluster/ -run Golden -args -update

.PHONY: k8s-bins
k8s-bins: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler into bin/k8s/ (cached).
	hack/k8s-bins.sh >/dev/null

##@ Build

.PHONY: build
build: ## Build bin/paddock as the image carries it: manager and broker, no dev environment (-tags nodev).
	CGO_ENABLED=0 go build -trimpath -tags nodev -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/paddock .

.PHONY: build-dev
build-dev: ## Build bin/paddock with the dev environment (paddock dev): what make dev runs.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/paddock .

.PHONY: run
run: manifests generate ## Run the manager against the cluster in $$KUBECONFIG.
	go run . manager --default-broker-image=$(IMG)

# What every paddock dev command of make dev is given: the binaries the Makefile builds, and
# bin/ (kubectl, paddock), which the environment's env file puts on PATH. DEV_FLAGS adds the
# person's own (--detach, --keep, --brokers=N, --dir=...; paddock dev --help).
DEV_ARGS = --k8s-bin-dir=$(K8S_BINS) --coredns=$(COREDNS) --prometheus-binary=$(PROMETHEUS) --bin-dir=$(LOCALBIN)

# make dev builds bin/paddock, then checks the machine before it builds anything else or
# touches .paddock/dev (paddock dev preflight), builds what is missing with a line per binary,
# then starts; the time to the first record consumed is counted from the moment make started
# (PADDOCK_DEV_SINCE).
.PHONY: dev
dev: export PADDOCK_DEV_SINCE := $(shell date +%s%N)
dev: ## Run the whole system locally: control plane, cluster DNS, the operator Deployment (config/default) and broker pods as processes (DEV_FLAGS=--detach: in the background until paddock dev down).
	@echo "make dev: building bin/paddock with the dev environment (the first time, with an empty Go build cache, this takes minutes)"
	@start=$$(date +%s); $(MAKE) --no-print-directory build-dev; echo "make dev: bin/paddock built in $$(( $$(date +%s) - start ))s"
	@$(LOCALBIN)/paddock dev preflight --before-build $(DEV_ARGS) $(DEV_FLAGS)
	@$(MAKE) --no-print-directory k8s-bins coredns kubectl kcat prometheus
	@$(LOCALBIN)/paddock dev $(DEV_ARGS) $(DEV_FLAGS)

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine): the slim paddock (-tags nodev), stamped with VERSION and the commit.
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(GIT_COMMIT) -t $(IMG) .

.PHONY: build-installer
build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml: CRDs, RBAC, the admission policy and the manager Deployment; NAMESPACES=a,b: a manager watching only those, its permissions bound in each.
	mkdir -p dist
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default $(if $(NAMESPACES),| go run ./hack/namespaced-install --namespaces=$(NAMESPACES)) > dist/install.yaml

##@ Release

RELEASE_DIR = dist/$(VERSION)
RELEASE_IMG = $(if $(filter command line environment,$(origin IMG)),$(IMG),ghcr.io/paddock-dev/paddock:v$(VERSION))
# PREVIOUS_VERSION, when given, is the release this one upgrades: the OLM bundle replaces it
# and may skip from any version since it.
PREVIOUS_VERSION ?=

.PHONY: release
release: manifests $(KUSTOMIZE) $(HELM) bundle-tool ## Write dist/VERSION/: install.yaml, crds.yaml, the OLM bundle (replacing PREVIOUS_VERSION) and the Helm chart paddock-VERSION.tgz, for IMG (default ghcr.io/paddock-dev/paddock:vVERSION).
	@[ "$(origin VERSION)" = "command line" ] || [ "$(origin VERSION)" = "environment" ] || { echo "make release: give VERSION=x.y.z" >&2; exit 2; }
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; cp -r config $$tmp/; \
	(cd $$tmp/config/manager && $(KUSTOMIZE) edit set image controller=$(RELEASE_IMG)); \
	$(KUSTOMIZE) build $$tmp/config/default > $(RELEASE_DIR)/install.yaml; \
	$(KUSTOMIZE) build $$tmp/config/manifests | $(BUNDLE_TOOL) generate --version $(VERSION) \
		--channels $(CHANNELS) $(if $(DEFAULT_CHANNEL),--default-channel $(DEFAULT_CHANNEL)) --image $(RELEASE_IMG) \
		$(if $(PREVIOUS_VERSION),--replaces paddock.v$(PREVIOUS_VERSION) --skip-range '>=$(PREVIOUS_VERSION) <$(VERSION)') \
		--bundle-dir $(RELEASE_DIR)/bundle --dockerfile $(RELEASE_DIR)/bundle.Dockerfile
	$(KUSTOMIZE) build config/crd > $(RELEASE_DIR)/crds.yaml
	$(BUNDLE_TOOL) validate --bundle-dir $(RELEASE_DIR)/bundle --dockerfile $(RELEASE_DIR)/bundle.Dockerfile
	$(HELM) package $(CHART) --version $(VERSION) --app-version $(VERSION) --destination $(RELEASE_DIR)
	@# The packaged chart must install what install.yaml installs.
	$(HELM) template paddock $(RELEASE_DIR)/paddock-$(VERSION).tgz --namespace paddock-system --kube-version $(K8S_VERSION) --include-crds \
		$(if $(filter command line environment,$(origin IMG)),--set image.repository=$(firstword $(subst :, ,$(IMG))) --set image.tag=$(lastword $(subst :, ,$(IMG)))) \
		> $(RELEASE_DIR)/.chart.yaml && go run ./hack/manifestcheck chart $(RELEASE_DIR)/install.yaml $(RELEASE_DIR)/.chart.yaml && rm $(RELEASE_DIR)/.chart.yaml
	@echo "make release: $(RELEASE_DIR): $$(ls $(RELEASE_DIR) | tr '\n' ' ')"

##@ OLM bundle

VERSION ?= 0.1.0
CHANNELS ?= candidate
DEFAULT_CHANNEL ?=
BUNDLE_TOOL ?= $(LOCALBIN)/paddock-bundle
# The bundle names a released image: an IMG given to make wins, else the VERSION's tag.
BUNDLE_OPERATOR_IMG = $(if $(filter command line environment,$(origin IMG)),$(IMG),ghcr.io/paddock-dev/paddock:v$(VERSION))

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) bundle-tool ## Generate the OLM bundle (bundle/, bundle.Dockerfile) for VERSION, CHANNELS, DEFAULT_CHANNEL, IMG.
	$(KUSTOMIZE) build config/manifests | $(BUNDLE_TOOL) generate --version $(VERSION) \
		--channels $(CHANNELS) $(if $(DEFAULT_CHANNEL),--default-channel $(DEFAULT_CHANNEL)) \
		--image $(BUNDLE_OPERATOR_IMG) --bundle-dir bundle --dockerfile bundle.Dockerfile

.PHONY: coredns
coredns: ## Build paddock dev's cluster DNS (CoreDNS with its kubernetes plugin, hack/coredns) into bin/ (cached).
	hack/k8s-bins.sh coredns >/dev/null

.PHONY: kubectl
kubectl: ## Build kubectl of the same Kubernetes version into bin/ (cached; bin/kubectl links it); the e2e suite runs it.
	hack/k8s-bins.sh kubectl >/dev/null

.PHONY: bundle-validate
bundle-validate: bundle-tool ## Validate bundle/ with OLM's validators (operator-sdk's operatorframework suite).
	$(BUNDLE_TOOL) validate --bundle-dir bundle --dockerfile bundle.Dockerfile

.PHONY: bundle-tool
bundle-tool: | $(LOCALBIN) ## Build hack/bundle (its own Go module) into bin/.
	go -C hack/bundle build -o $(BUNDLE_TOOL) .

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): | $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

$(KUSTOMIZE): | $(LOCALBIN)
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

$(GOLANGCI_LINT): | $(LOCALBIN)
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

$(PROMTOOL): | $(LOCALBIN)
	$(call go-install-tool,$(PROMTOOL),github.com/prometheus/prometheus/cmd/promtool,$(PROMTOOL_VERSION),-tags remove_all_sd)

$(PROMETHEUS): | $(LOCALBIN)
	$(call go-install-tool,$(PROMETHEUS),github.com/prometheus/prometheus/cmd/prometheus,$(PROMETHEUS_VERSION),-tags remove_all_sd$(comma)enable_kubernetes_sd)

$(GOTESTSUM): | $(LOCALBIN)
	$(call go-install-tool,$(GOTESTSUM),gotest.tools/gotestsum,$(GOTESTSUM_VERSION))

.PHONY: kcat
kcat: ## Install kcat (the e2e suite's CLI Kafka client) with apt-get when it is missing.
	hack/install-kcat.sh >/dev/null

.PHONY: kafkajs
kafkajs: ## Install kafkajs for test/interop (npm ci from test/interop/js/package-lock.json; nodejs and npm with apt-get when missing).
	hack/install-kafkajs.sh >/dev/null

.PHONY: interop
interop: k8s-bins kcat kafkajs ## Run only the client interop suite (test/interop: sarama, kafka-go, kcat, kafkajs).
	go test $(GO_TEST_FLAGS) ./test/interop/...

$(HELM): | $(LOCALBIN)
	$(call go-install-tool,$(HELM),helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

# The module's example/ CRDs: go mod download fetches the module into the Go module cache
# (a 4.6 MB zip, once) and three of its files are copied.
$(MONITORING_CRDS): | $(LOCALBIN)
	@set -e; echo "Copying the Prometheus Operator $(PROMETHEUS_OPERATOR_VERSION) CRDs"; \
	dir=$$(go mod download -json github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "go mod download github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) gave no directory" >&2; exit 1; }; \
	tmp=$$(mktemp -d $(LOCALBIN)/crds-XXXXXX); \
	for kind in podmonitors servicemonitors prometheusrules; do cp $$dir/example/prometheus-operator-crd/monitoring.coreos.com_$$kind.yaml $$tmp/; done; \
	chmod -R u+w $$tmp; mkdir -p $(LOCALBIN)/crds; mv $$tmp $@

.PHONY: controller-gen kustomize golangci-lint gotestsum helm promtool prometheus monitoring-crds
monitoring-crds: $(MONITORING_CRDS) ## Copy the Prometheus Operator's PodMonitor, ServiceMonitor and PrometheusRule CRDs into bin/crds/ (the envtest suites install them).
helm: $(HELM) ## Build helm into bin/ from the Go module proxy.
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
kustomize: $(KUSTOMIZE) ## Install kustomize into bin/.
golangci-lint: $(GOLANGCI_LINT) ## Install golangci-lint into bin/.
gotestsum: $(GOTESTSUM) ## Install gotestsum (make test's runner and summary) into bin/.
promtool: $(PROMTOOL) ## Install promtool (test/monitoring's rule and metrics checker) into bin/.
prometheus: $(PROMETHEUS) ## Install Prometheus (kubernetes discovery only; paddock dev's and the e2e suite's) into bin/.

# go-install-tool installs package $(2) at version $(3) as the file $(1), with go install flags $(4).
define go-install-tool
@set -e; echo "Installing $(2)@$(3) $(4)"; tmp=$$(mktemp -d); \
GOBIN=$$tmp go install $(4) $(2)@$(3); mv $$tmp/$$(basename $$(echo $(2) | sed 's|/v[0-9]*$$||')) $(1); rm -rf $$tmp
endef
