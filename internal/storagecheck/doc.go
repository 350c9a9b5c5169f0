// Package storagecheck is `paddock storage check` (docs/storage.md, "The storage check"):
// storage.CheckVolume run from two nodes at once. The peer serves the file-system calls of
// storage.FS on its data volume over TCP (remotefs.go); the checker runs CheckVolume with its
// own volume as node a and the peer's, through that connection, as node b, and reports per
// property: on stdout, and in the termination message the operator reads.
//
// It must never touch cluster data: CheckVolume works in a fresh subdirectory of the data
// directory and removes it, and the peer refuses every path outside such a subdirectory. It
// imports no Kubernetes client: the operator learns the result from the pod's termination
// message.
package storagecheck
