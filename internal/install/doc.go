// Package install turns the rendered installation (`kustomize build config/default`) into
// the one of a manager that watches only some namespaces (docs/security.md, "Least
// privilege"): `make build-installer NAMESPACES=a,b` runs it through hack/namespaced-install.
//
// It is pure: unstructured objects in, unstructured objects out; no client, no I/O.
package install
