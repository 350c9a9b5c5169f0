//go:build !nodev

package buildinfo

// Flavour is "dev": this build carries the dev environment (`paddock dev`).
const Flavour = "dev"
