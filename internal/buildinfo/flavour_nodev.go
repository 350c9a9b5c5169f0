//go:build nodev

package buildinfo

// Flavour is "slim": this build carries only what runs in a cluster (the image's build).
const Flavour = "slim"
