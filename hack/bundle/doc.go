// Command bundle generates paddock's OLM bundle without operator-sdk, and validates it with
// OLM's own validators (github.com/operator-framework/api/pkg/validation, the ones
// `operator-sdk bundle validate --select-optional suite=operatorframework` runs).
//
//	kustomize build config/manifests | bundle generate --version 0.1.0 --image IMG
//	bundle validate --bundle-dir bundle --dockerfile bundle.Dockerfile
//
// generate reads everything from its inputs: the CSV base, CRDs, manager Deployment, RBAC and
// samples from the kustomize output, and the CRD display names, descriptions, resources and
// descriptors from the +operator-sdk:csv:customresourcedefinitions markers and doc comments of
// api/v1alpha1 (read with go/parser, never imported). It must never carry a hand-maintained
// copy of any of them, and its output must be byte-for-byte the same for the same inputs.
//
// It is its own Go module so that operator-framework/api and the Kubernetes version it pins
// never touch the operator's go.mod.
package main
