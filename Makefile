# engine: a CUE-template reconcile engine for Kubernetes.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
BIN   := $(CURDIR)/bin
GO    ?= go
PKGS  := ./...
export KUBEBUILDER_ASSETS := $(BIN)
export PATH := $(BIN):$(PATH)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the engine and its provider plugins into bin/ (engine, engine-provider-gcs, engine-provider-postgresql; engine-gcs-emulator for engine dev).
	@GO=$(GO) bash hack/build.sh $(BIN) "$(LDFLAGS)"

.PHONY: assets
assets: ## Build the local control plane and helm into bin/ (kube-apiserver, etcd, controller-manager, scheduler, kubectl, kwok, helm).
	@bash hack/build-assets.sh

.PHONY: prometheus
prometheus: ## Install Debian's prometheus where it is missing (apt-get as root; the rollout analysis tests start throwaway servers from it).
	@bash hack/prometheus.sh install

.PHONY: postgres
postgres: ## Install Debian's postgresql-15 where initdb/pg_ctl are missing (apt-get as root; the postgresql provider's tests start throwaway servers from it).
	@bash hack/postgres.sh install

.PHONY: image
image: ## Build the engine's image with podman, without Docker or a network (installs podman as root where missing): ghcr.io/cuengine/engine:<chart appVersion>, its OCI archive and CycloneDX SBOM in bin/image/.
	@bash hack/image.sh

.PHONY: vulncheck
vulncheck: ## Scan the engine's binary with govulncheck offline, against a database built from the golang.org/x/vulndb module (three minutes the first time).
	@bash hack/vulncheck.sh

.PHONY: generate
generate: build ## Regenerate config/crds.yaml, config/rbac.yaml, config/templates and the chart's generated files (charts/engine/crds, files/) from examples/templates, and the built-in kinds' schemas (templates/openapi/builtin.json.gz) from k8s.io/kubernetes.
	ENGINE=$(BIN)/engine hack/generate.sh .

.PHONY: verify
verify: build ## Check that config/ and the chart are what `make generate` writes, that the code is gofmt-ed and follows the import rules of hack/imports.sh (seconds, no cluster).
	@ENGINE=$(BIN)/engine hack/verify.sh

# The corpus of templates written by others, and of Kubernetes' example
# manifests as children (testdata/corpus/SOURCES.md); e2e's TestCorpus runs
# them live.
CORPUS := testdata/corpus/templates testdata/corpus/manifests

.PHONY: test-templates
test-templates: build ## Run the test cases of the example templates and of the corpus of templates written by others (testdata/corpus: engine vet and engine test, offline, seconds).
	$(BIN)/engine test --templates examples/templates
	$(BIN)/engine vet --templates examples/autoscaled/templates
	$(BIN)/engine test --templates examples/autoscaled/templates
	$(BIN)/engine vet --templates examples/versions/templates
	$(BIN)/engine test --templates examples/versions/templates
	$(BIN)/engine vet --templates examples/multicluster/templates
	$(BIN)/engine test --templates examples/multicluster/templates
	@status=0; for d in $(CORPUS); do \
		echo "$(BIN)/engine vet --templates $$d"; $(BIN)/engine vet --templates $$d || status=1; \
		echo "$(BIN)/engine test --templates $$d"; $(BIN)/engine test --templates $$d || status=1; \
	done; exit $$status

# The chart's value sets that `make test-chart` lints and renders: the
# defaults (as config/), and every option on (with the webhook's client CA
# and the NetworkPolicy with a peer for each port; the NetworkPolicy with
# its empty peer lists is rendered below).
CHART        := charts/engine
CHART_VALUES := --set gcs.keySecret=engine-gcs-key,prometheus.url=http://prometheus.monitoring:9090,prometheus.secret=engine-prometheus,dashboard.enabled=true,prometheusRule.enabled=true,sharding.enabled=true,replicaCount=3,clusters.namespace=engine-system --set 'serviceAccount.annotations.iam\.gke\.io/gcp-service-account=engine@p.iam.gserviceaccount.com' \
	--set webhook.clientCAConfigMap=engine-webhook-client-ca,networkPolicy.enabled=true,'networkPolicy.webhook.from[0].ipBlock.cidr=10.0.0.0/24' --set 'networkPolicy.metrics.from[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring'

.PHONY: test-chart
test-chart: assets ## Lint the Helm chart and render it, with its defaults and with every option on (helm lint --strict, helm template; seconds).
	$(BIN)/helm lint --strict $(CHART)
	$(BIN)/helm lint --strict $(CHART) $(CHART_VALUES)
	$(BIN)/helm template engine $(CHART) --namespace engine-system --include-crds >/dev/null
	$(BIN)/helm template engine $(CHART) --namespace engine-system $(CHART_VALUES) >/dev/null
	$(BIN)/helm template engine $(CHART) --namespace engine-system --set templates.existingConfigMap=my-templates >/dev/null
	$(BIN)/helm template engine $(CHART) --namespace engine-system --set networkPolicy.enabled=true >/dev/null

# promcheck, from its own module: Prometheus's rule and PromQL parsers, for
# the alerts and the dashboard of config/components/monitoring.
PROMCHECK  := $(BIN)/promcheck
MONITORING := config/components/monitoring
$(PROMCHECK): $(wildcard hack/tools/promcheck/*.go) hack/tools/promcheck/go.mod hack/tools/promcheck/go.sum
	cd hack/tools/promcheck && $(GO) build -o $@ .

.PHONY: test-monitoring
test-monitoring: $(PROMCHECK) ## Check the alerts as `promtool check rules` does and that the dashboard's queries parse (hack/tools/promcheck).
	cd hack/tools/promcheck && $(GO) test -count=1 .
	$(PROMCHECK) rules $(MONITORING)/prometheusrule.yaml
	$(PROMCHECK) metrics $(MONITORING)/engine-dashboard.json $(MONITORING)/prometheusrule.yaml >/dev/null

.PHONY: test-unit
test-unit: ## The fast lane: every test that needs no control plane, with -race (go test -short; about a minute, no `make assets`).
	$(GO) test -short -race -count=1 $(PKGS)

# make test's stage markers, with the seconds since make started.
START := $(shell date +%s)
stage = @echo "test: $(1) ($$(( $$(date +%s) - $(START) ))s elapsed)"

.PHONY: test
test: verify lint ## Check (verify, lint), run the fast lane (test-unit) so a slip fails in a minute, then the templates' cases, the chart, the alerts and dashboard, every test (unit, integration, end-to-end) with -race and the fault suite at full size.
	$(call stage,stage 1/2: fast lane (no control plane): make test-unit fuzz-compile)
	@$(MAKE) --no-print-directory test-unit fuzz-compile
	$(call stage,stage 2/2: full (control plane): make assets postgres prometheus build test-templates test-chart test-monitoring$(comma) every test with -race$(comma) then test-faults)
	@$(MAKE) --no-print-directory assets postgres prometheus build test-templates test-chart test-monitoring
	$(GO) test -race -count=1 -timeout 40m -skip '^TestFaults$$' $(PKGS)
	@$(MAKE) --no-print-directory test-faults
	$(call stage,passed)

.PHONY: test-faults
test-faults: assets build ## The fault suite at full size (300 MyKinds, 20 Storefronts, 20 Gcs; part of `make test`): prints the time to converge after each fault.
	$(GO) test -count=1 -timeout 60m -run TestFaults -v ./e2e

.PHONY: fuzz
fuzz: ## Fuzz template evaluation, then the compiler, a minute each (FUZZTIME=10m for longer).
	$(GO) test ./templates -run '^$$' -fuzz '^FuzzEvaluate$$' -fuzztime $${FUZZTIME:-1m}
	@$(MAKE) --no-print-directory fuzz-compile FUZZTIME=$${FUZZTIME:-1m}

# go test -fuzz takes one target at a time.
.PHONY: fuzz-compile
fuzz-compile: FUZZTIME ?= 20s
fuzz-compile: ## Fuzz the compiler (FUZZTIME each, 20s; part of `make test`): parent schemas built from CUE's constructs, and mutated template files of testdata/ and examples/. A crash lands in templates/testdata/fuzz.
	$(GO) test ./templates -run '^$$' -fuzz '^FuzzCompileSpec$$' -fuzztime $(FUZZTIME)
	$(GO) test ./templates -run '^$$' -fuzz '^FuzzCompileTemplate$$' -fuzztime $(FUZZTIME)

.PHONY: dev
dev: assets build ## Start a local cluster with the example templates and the engine (Ctrl-C stops it).
	$(BIN)/engine dev --templates examples/templates

.PHONY: dev-multicluster
dev-multicluster: WORKLOAD ?= west
dev-multicluster: assets build ## The same with examples/multicluster and a workload cluster per name in WORKLOAD (default west; west,east for two).
	$(BIN)/engine dev --templates examples/multicluster/templates --workload-cluster $(WORKLOAD)

comma := ,

.PHONY: bench
bench: N ?= 1000
bench: ROUNDS ?= 3
bench: WORKERS ?= 4
bench: PEERS ?=
bench: assets build ## Run the benchmarks: template micro-benchmarks, then engine vs hand-written controller vs raw apiserver (N, ROUNDS, WORKERS; PEERS=kro adds kro, built into bin/).
	@if [ -n "$(PEERS)" ]; then bash hack/build-assets.sh $(subst $(comma), ,$(PEERS)); fi
	$(GO) test -run '^$$' -bench . -benchmem ./bench/micro
	$(GO) run ./bench/cmd/bench -n $(N) -rounds $(ROUNDS) -workers $(WORKERS) -peers '$(PEERS)'

.PHONY: bench-sharding
bench-sharding: N ?= 5000
bench-sharding: SHARDS ?= 1,3
bench-sharding: ROUNDS ?= 1
bench-sharding: WORKERS ?= 4
bench-sharding: assets build ## Benchmark sharding: the engine without it, then with --sharding over SHARDS replicas (1,3): times, peak RSS and parents per replica (N=5000, ROUNDS=1, WORKERS).
	$(GO) run ./bench/cmd/bench -n $(N) -rounds $(ROUNDS) -workers $(WORKERS) -shards '$(SHARDS)'

.PHONY: bench-scale
bench-scale: N ?= 50000
bench-scale: assets build ## Benchmark scale: N MyKinds (50000) with replicas 0, engine and reference with their defaults: time until all Ready, peak RSS, RSS per parent, CPU, and a restart with the N parents in place. MEMORY_LIMIT=1Gi runs each in a memory cgroup of that size, as a container (root).
	$(GO) run ./bench/cmd/bench -scale -n $(N) -phase-timeout 60m $(if $(MEMORY_LIMIT),-memory-limit $(MEMORY_LIMIT))

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet $(PKGS)

# staticcheck, at the version hack/tools/staticcheck/go.mod pins.
STATICCHECK := $(BIN)/staticcheck
$(STATICCHECK): hack/tools/staticcheck/go.mod hack/tools/staticcheck/go.sum
	cd hack/tools/staticcheck && $(GO) build -o $@ honnef.co/go/tools/cmd/staticcheck

# funlen, at the version hack/tools/funlen/go.mod pins, with the limit its
# main.go sets (100 lines).
FUNLEN := $(BIN)/funlen
$(FUNLEN): hack/tools/funlen/main.go hack/tools/funlen/go.mod hack/tools/funlen/go.sum
	cd hack/tools/funlen && $(GO) build -o $@ .

# unparam, at the version hack/tools/unparam/go.mod pins.
UNPARAM := $(BIN)/unparam
$(UNPARAM): hack/tools/unparam/go.mod hack/tools/unparam/go.sum
	cd hack/tools/unparam && $(GO) build -o $@ mvdan.cc/unparam

.PHONY: lint
lint: vet $(STATICCHECK) $(FUNLEN) $(UNPARAM) ## Run go vet and staticcheck (on promcheck's and funlen's modules too), funlen (no function outside tests and bench/ over 100 lines) and unparam (no parameter or result that never varies) outside bench/.
	$(STATICCHECK) $(PKGS)
	cd hack/tools/promcheck && $(GO) vet . && $(STATICCHECK) .
	cd hack/tools/funlen && $(GO) vet . && $(STATICCHECK) .
	$(FUNLEN) -test=false $$($(GO) list $(PKGS) | grep -Ev '^github.com/cuengine/engine/bench(/|$$)')
	$(UNPARAM) $$($(GO) list $(PKGS) | grep -Ev '^github.com/cuengine/engine/bench(/|$$)')

.PHONY: clean
clean: ## Remove built binaries (keeps the control plane, which is slow to build).
	rm -f $(BIN)/engine $(BIN)/engine-provider-* $(BIN)/engine-gcs-emulator
